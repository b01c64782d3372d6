"""Protocol buffers of the cluster protocol (generated stubs: never edit them by hand)."""

"""The cluster runtime: the engine's executor for real jobs, in shock's own types.

It knows runs, leases, workers, commands and job events as frozen dataclasses
(`messages.py`, `job_messages.py`) and reaches workers through a small transport
(`transport.py`). The gRPC service and the Ray backend are adapters around it: they translate
their wire formats at the edge and never decide anything.
"""

"""The engine: the one scheduling loop every backend drives, and the round mechanism."""

"""The real cluster: a gRPC scheduler service, worker agents and their journal."""

import os

# Agents fork only to exec job processes, never to use gRPC in the child: gRPC's fork
# handlers are not needed (and warn when other threads are in a call).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

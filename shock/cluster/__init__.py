"""The real cluster: the runtime (`runtime/`), its gRPC and Ray adapters, the journal."""

import os

# Agents fork only to exec job processes, never to use gRPC in the child: gRPC's fork
# handlers are not needed (and warn when other threads are in a call).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

"""Real PyTorch training jobs for shock's cluster backend: small workloads of Gavel's model
families, and the harness that runs them under a lease (see docs/workloads.md)."""

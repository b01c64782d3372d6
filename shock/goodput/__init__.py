"""Goodput-aware scheduling's shared model (Pollux OSDI'21, Sia SOSP'23).

- `model`: Pollux's per-step time model (compute linear in the local batch size, network
  time by replicas within and across nodes, overlapped with the exponent gamma), its fit from
  measured step times, statistical efficiency from the gradient noise scale, goodput, and the
  best batch size (with gradient accumulation) for a GPU count.
- `applications`: the per-application measurements bundled from Pollux's artifact
  (`shock/data/pollux/`), as goodput models.
- `speedup`: a job's goodput speedup table over (nodes, GPUs), which the policies search.
"""

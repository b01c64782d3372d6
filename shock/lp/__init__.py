"""The optimisation layer: LPs in matrix form for HiGHS, Pyomo solving, POP partitioning and
the numeric helpers Gavel's presets need (the ECOS-style interior point, the analytic centre)."""

"""shock: a plugin-based scheduler and simulator for deep-learning GPU clusters."""

__version__ = "0.1.0"

"""Figures of results documents and sweeps (matplotlib, drawn off-screen)."""

"""The built-in presets: shock's own `default`, and one per artifact whose simulator it
reproduces (`gavel`, `shockwave`, `synergy`, `sia`), each with the policy options that artifact's
baselines need (docs/semantics.md)."""

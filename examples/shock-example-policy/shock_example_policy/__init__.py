"""An example third-party shock plugin package.

The plugin itself lives in `shock_example_policy.sjf`; this package exists to show how little
a plugin needs: one module with a `@hookimpl` registration function and one entry point in
the `shock` group of `pyproject.toml`.
"""

__version__ = "0.1.0"

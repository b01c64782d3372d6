"""An example third-party shock backend package.

The backend lives in `shock_example_backend.noisy`: an executor for shock's engine, a backend
object with typed options, and one `@hookimpl` registration function, all written against
`shock.api` only.
"""

__version__ = "0.1.0"

"""Built-in plugin: Gavel's trace format."""

from shock.api import Register, hookimpl
from shock.traces.gavel import GavelTraceFormat


@hookimpl
def register_trace_formats(register: Register) -> None:
    register(GavelTraceFormat())

"""Built-in plugin: Shockwave's trace format."""

from shock.api import Register, hookimpl
from shock.traces.shockwave import ShockwaveTraceFormat


@hookimpl
def register_trace_formats(register: Register) -> None:
    register(ShockwaveTraceFormat())

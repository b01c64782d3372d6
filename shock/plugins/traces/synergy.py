"""Built-in plugin: Synergy's CSV trace format."""

from shock.core.hookspecs import Register, hookimpl
from shock.traces.synergy import SynergyTraceFormat


@hookimpl
def register_trace_formats(register: Register) -> None:
    register(SynergyTraceFormat())

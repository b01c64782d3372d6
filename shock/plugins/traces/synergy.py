"""Built-in plugin: Synergy's CSV trace formats (shock's form with a header, and Synergy's own
record form without one), with Synergy's throughputs as their default table."""

from __future__ import annotations

from shock.api import Register, ThroughputTable, Trace, hookimpl
from shock.traces.synergy import SynergyRecordFormat, SynergyTraceFormat


class SynergyDefaults:
    def default_throughputs(
        self, trace: Trace, worker_types: tuple[str, ...], base: ThroughputTable
    ) -> ThroughputTable:
        """Synergy's profiled steps/s for its models; other job types keep `base`'s."""
        from shock.resources.throughputs import synergy_throughput_table

        return synergy_throughput_table(trace.jobs, worker_types, base)

    def default_cluster(self, trace: Trace) -> str:
        """Synergy's evaluation cluster: 16 servers of 8 V100s, 24 CPUs and 500 GB each."""
        return "synergy-128"


class SynergyTraces(SynergyDefaults, SynergyTraceFormat):
    pass


class SynergyRecordTraces(SynergyDefaults, SynergyRecordFormat):
    pass


@hookimpl
def register_trace_formats(register: Register) -> None:
    register(SynergyTraces())
    register(SynergyRecordTraces())

# Re-export for shock/cluster/scheduler.py; this module goes when the scheduler moves to the engine.
from shock.core.measured_throughputs import ThroughputEstimates as ThroughputEstimates

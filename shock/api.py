"""shock's public API: the stable surface for plugin authors and for programs that run shock.

Import from here, and only from here: everything under `shock.core`, `shock.plugins` and
`shock.cli` is internal and may change between releases; the names below keep their meaning.

- Plugin contract: `hookimpl` marks a hook function, `Register` is the callback the
  registration hooks receive (see docs/plugins.md for every hook).
- Policies: `Policy`, `PolicyInput`, `PolicyJob`, `Allocation` (with an elastic policy's
  `ElasticGrant` per job), `ProblemClass`, `UnitKey`, how the objectives of a partitioned
  problem's parts combine (`PartObjectives`), and the solver they are handed (`SolverSpec`,
  `solve_pyomo`; an LP or MILP stated once as a `MatrixLP`, or from `RowBlock`s by
  `blocks_lp`, solved by `solve_matrix_lp` / `solve_matrix_milp` with HiGHS directly or any
  solver through Pyomo, or re-solved with new bounds by an `LpSequence` (`LpStatus`)).
- Presets (`register_presets`): `Preset`, and the semantics it chooses (`SelectionRule`,
  `OverheadRule`, `OverheadEffect`, `RhoContention`, `RhoAlone`).
- Placements: `Placement`, `PlacementRequest`; resource-aware ones `ResourcePlacement`,
  `ServerResources`, `ResourceRequest`, `ResourceGrant`, `GrantPart`.
- Adaptation: `AdaptationModel` (batch sizes per epoch), `AdaptationRules` and
  `BatchSizeRules` (how simulated batch sizes evolve; they act on a `Mechanism`'s
  `JobState`s, given each job's `BatchSchedule`).
- Backends: `Backend`; the executor contract that `run_engine` drives (`Executor`,
  `ExecutorCapabilities`, `RoundPlan`, `PlannedUnit`, `BatchSizeOrder`, `RoundReport`,
  `UnitProgress`, `StrayProgress`, `MeasuredRate`, `MeasuredPairRate`, `BatchSizeChange`;
  for a simulating executor that takes rounds as arrays, `ColumnarExecutor`, `RoundColumns`,
  `ColumnProgress`); a backend's own options are a dataclass (`BackendOption` describes
  one, `declared_options` lists a backend's);
  `RunRequest`, `RunConfig`, `ClusterRuntime`, `RunResult`, `JobRecord`;
  `check_throughputs_known` (a simulating backend's check that the table has every job
  type's rates).
- Traces and the cluster: `TraceFormat`, `Trace`, `JobSpec`, `Cluster`, `Server`,
  `ThroughputTable`.
- Observer events: `RunStarted`, `JobArrived`, `AllocationComputed`, `RoundStarted`,
  `RoundEnded`, `JobFinished`, `RunFinished`.
- Running: `RunOptions`, `build_request`, `run`; the plugin registry (`PluginRegistry`,
  `load_plugins`, `default_registry`).
- Errors a user can act on: `ShockError`, `InputError`, `UnknownPluginError`, `SolverError`.
- Building blocks the built-in plugins share: typed policy options (`typed_options`), JSON forms
  of policy state (`by_job`, `job_keyed`, `job_pairs`, `pairs_of`, `random_state`,
  `set_random_state`, and numpy generators' `generator_state`, `set_generator_state`), job
  kinds (`batch_size_of`, `model_family_of`, `DEFAULT_ENTITY`, `DEFAULT_CPUS_PER_GPU`,
  `DEFAULT_MEM_GB_PER_GPU`), epochs and batch-size schedules
  (`adaptation_data`, `datasets`, `num_epochs`, `steps_per_epoch`, `job_type_with_batch_size`,
  `follow_schedule`), fairness (`fair_share_runtime`, `finish_time_ratio`), and the optimisation
  layer's direct paths (`highs_lp`, `new_highs`, `quiet_highs_banner`, `model_size`,
  `is_nonlinear`, the ECOS-style `conic_interior_point` and `conic_interior_point_optimum`,
  `analytic_centre`, `is_strictly_feasible`).
"""

from __future__ import annotations

from shock.core.adaptation import AdaptationModel, AdaptationRules, BatchSizeRules
from shock.core.backend_options import BackendOption, declared_options
from shock.core.errors import InputError, ShockError, SolverError, UnknownPluginError
from shock.core.events import (
    AllocationComputed,
    JobArrived,
    JobFinished,
    RoundEnded,
    RoundStarted,
    RunFinished,
    RunStarted,
)
from shock.core.executor import (
    BatchSizeChange,
    BatchSizeOrder,
    ColumnarExecutor,
    ColumnProgress,
    Executor,
    ExecutorCapabilities,
    MeasuredPairRate,
    MeasuredRate,
    PlannedUnit,
    RoundColumns,
    RoundPlan,
    RoundReport,
    StrayProgress,
    UnitProgress,
)
from shock.core.hookspecs import Register, hookimpl
from shock.core.model import Cluster, JobSpec, Server, batch_size_of, model_family_of
from shock.core.placement import Placement, PlacementRequest
from shock.core.plugins import PluginRegistry, default_registry, load_plugins
from shock.core.policy import (
    Allocation,
    ElasticGrant,
    PartObjectives,
    Policy,
    PolicyInput,
    PolicyJob,
    UnitKey,
)
from shock.core.policy_options import typed_options
from shock.core.policy_state import (
    by_job,
    generator_state,
    job_keyed,
    job_pairs,
    pairs_of,
    random_state,
    set_generator_state,
    set_random_state,
)
from shock.core.presets import Preset
from shock.core.resource_placement import (
    DEFAULT_CPUS_PER_GPU,
    DEFAULT_MEM_GB_PER_GPU,
    GrantPart,
    ResourceGrant,
    ResourcePlacement,
    ResourceRequest,
    ServerResources,
)
from shock.core.results import JobRecord, RunResult
from shock.core.run import Backend, ClusterRuntime, RunConfig, RunRequest
from shock.core.semantics import (
    OverheadEffect,
    OverheadRule,
    RhoAlone,
    RhoContention,
    SelectionRule,
)
from shock.core.solver import ProblemClass, Solver, SolverSpec
from shock.core.throughputs import ThroughputTable
from shock.core.trace import Trace, TraceFormat
from shock.engine.dynamics import BatchSchedule, follow_schedule
from shock.engine.engine import run_engine
from shock.engine.entities import DEFAULT_ENTITY
from shock.engine.epochs import (
    adaptation_data,
    datasets,
    job_type_with_batch_size,
    num_epochs,
    steps_per_epoch,
)
from shock.engine.mechanism import Mechanism
from shock.engine.metrics import fair_share_runtime, finish_time_ratio
from shock.engine.run_estimates import check_throughputs_known
from shock.engine.runner import RunOptions, build_request, run
from shock.engine.units import JobState
from shock.lp.analytic_centre import analytic_centre, is_strictly_feasible
from shock.lp.conic_interior_point import conic_interior_point, conic_interior_point_optimum
from shock.lp.lp_sequence import LpSequence, LpStatus
from shock.lp.matrix_lp import (
    MatrixLP,
    highs_lp,
    new_highs,
    quiet_highs_banner,
    solve_matrix_lp,
    solve_matrix_milp,
)
from shock.lp.pyomo_solver import PyomoSolver, is_nonlinear, model_size, solve_pyomo
from shock.lp.row_blocks import RowBlock, blocks_lp
from shock.util.lazy import lazy_module

__all__ = [  # grouped in the module docstring
    "DEFAULT_CPUS_PER_GPU",
    "DEFAULT_ENTITY",
    "DEFAULT_MEM_GB_PER_GPU",
    "AdaptationModel",
    "AdaptationRules",
    "Allocation",
    "AllocationComputed",
    "Backend",
    "BackendOption",
    "BatchSchedule",
    "BatchSizeChange",
    "BatchSizeOrder",
    "BatchSizeRules",
    "Cluster",
    "ClusterRuntime",
    "ColumnProgress",
    "ColumnarExecutor",
    "ElasticGrant",
    "Executor",
    "ExecutorCapabilities",
    "GrantPart",
    "InputError",
    "JobArrived",
    "JobFinished",
    "JobRecord",
    "JobSpec",
    "JobState",
    "LpSequence",
    "LpStatus",
    "MatrixLP",
    "MeasuredPairRate",
    "MeasuredRate",
    "Mechanism",
    "OverheadEffect",
    "OverheadRule",
    "PartObjectives",
    "Placement",
    "PlacementRequest",
    "PlannedUnit",
    "PluginRegistry",
    "Policy",
    "PolicyInput",
    "PolicyJob",
    "Preset",
    "ProblemClass",
    "PyomoSolver",
    "Register",
    "ResourceGrant",
    "ResourcePlacement",
    "ResourceRequest",
    "RhoAlone",
    "RhoContention",
    "RoundColumns",
    "RoundEnded",
    "RoundPlan",
    "RoundReport",
    "RoundStarted",
    "RowBlock",
    "RunConfig",
    "RunFinished",
    "RunOptions",
    "RunRequest",
    "RunResult",
    "RunStarted",
    "SelectionRule",
    "Server",
    "ServerResources",
    "ShockError",
    "Solver",
    "SolverError",
    "SolverSpec",
    "StrayProgress",
    "ThroughputTable",
    "Trace",
    "TraceFormat",
    "UnitKey",
    "UnitProgress",
    "UnknownPluginError",
    "adaptation_data",
    "analytic_centre",
    "batch_size_of",
    "blocks_lp",
    "build_request",
    "by_job",
    "check_throughputs_known",
    "conic_interior_point",
    "conic_interior_point_optimum",
    "datasets",
    "declared_options",
    "default_registry",
    "fair_share_runtime",
    "finish_time_ratio",
    "follow_schedule",
    "generator_state",
    "highs_lp",
    "hookimpl",
    "is_nonlinear",
    "is_strictly_feasible",
    "job_keyed",
    "job_pairs",
    "job_type_with_batch_size",
    "lazy_module",
    "load_plugins",
    "model_family_of",
    "model_size",
    "new_highs",
    "num_epochs",
    "pairs_of",
    "quiet_highs_banner",
    "random_state",
    "run",
    "run_engine",
    "set_generator_state",
    "set_random_state",
    "solve_matrix_lp",
    "solve_matrix_milp",
    "solve_pyomo",
    "steps_per_epoch",
    "typed_options",
]

"""LPs and MILPs in matrix form: the one formulation of every optimisation policy.

A policy states its problem once as a `MatrixLP` (columns with bounds and costs, rows with
bounds, HiGHS' column-wise matrix). When the chosen solver plugin declares
`highspy_fast_path` (it is HiGHS) the arrays go to highspy directly: no modelling overhead
per round. Any other solver gets the same matrix as a Pyomo model (`matrix_pyomo`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np

from shock.core.errors import SolverError
from shock.core.solver import SolverSpec
from shock.lp.matrix_pyomo import solve_with_pyomo


@dataclass(frozen=True, slots=True)
class MatrixLP:
    """min c.x  s.t.  row_lower <= A x <= row_upper,  col_lower <= x <= col_upper.

    `A` is given column-wise (CSC: start, index, value) as HiGHS takes it.
    """

    cost: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    a_start: np.ndarray
    a_index: np.ndarray
    a_value: np.ndarray


_HIGHS_INSTANCES: dict[tuple[object, ...], Any] = {}


@cache
def quiet_highs_banner() -> None:
    """HiGHS prints a banner on stdout when a process makes its first instance, before any
    option can turn output off. Make that first instance with stdout pointed at /dev/null, so
    shock's own output (tables, piped documents) stays clean; later instances print nothing."""
    import highspy

    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to keep clean
        highspy.Highs()
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def new_highs() -> Any:
    """A silent HiGHS instance."""
    import highspy

    quiet_highs_banner()
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    return highs


def _highs_for(spec: SolverSpec, mip: bool = False) -> Any:
    """One HiGHS instance per option set, reused: creating one costs as much as a small solve.
    LPs get interior point without presolve; MILPs HiGHS' own defaults."""
    key = (mip, spec.time_limit_s, spec.mip_gap, tuple(sorted(spec.options.items())))
    highs = _HIGHS_INSTANCES.get(key)
    if highs is None:
        highs = new_highs()
        if not mip:
            # The centre of the optimal face, like Gavel's cvxpy/ECOS, not an arbitrary vertex.
            highs.setOptionValue("solver", "ipm")
            highs.setOptionValue("run_crossover", "choose")
            # Presolve costs more than it saves on these small LPs (same solution without it).
            highs.setOptionValue("presolve", "off")
        if spec.time_limit_s is not None:
            highs.setOptionValue("time_limit", float(spec.time_limit_s))
        if spec.mip_gap is not None:
            highs.setOptionValue("mip_rel_gap", float(spec.mip_gap))
        for option, value in spec.options.items():
            highs.setOptionValue(option, value)
        _HIGHS_INSTANCES[key] = highs
    return highs


def highs_lp(lp: MatrixLP) -> Any:
    """The LP as a highspy.HighsLp (for a HiGHS instance driven directly)."""
    import highspy

    model = highspy.HighsLp()
    model.num_col_ = len(lp.cost)
    model.num_row_ = len(lp.row_lower)
    model.col_cost_ = lp.cost
    model.col_lower_ = lp.col_lower
    model.col_upper_ = lp.col_upper
    model.row_lower_ = lp.row_lower
    model.row_upper_ = lp.row_upper
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = lp.a_start
    model.a_matrix_.index_ = lp.a_index
    model.a_matrix_.value_ = lp.a_value
    return model


def solve_matrix_lp(lp: MatrixLP, spec: SolverSpec) -> np.ndarray:
    """Solve an LP and return x: HiGHS directly with its interior-point method when the spec
    takes the fast path (crossover runs only when the interior point is imprecise, so the
    solution stays inside the optimal face), otherwise the same LP as a Pyomo model handed to
    the spec's solver plugin."""
    if not spec.uses_fast_path:
        return solve_with_pyomo(lp, spec)
    import highspy

    highs = _highs_for(spec)
    num_col = len(lp.cost)
    # The arrays by pointer (no HighsLp object to fill field by field): the same model.
    highs.passModel(
        num_col,
        len(lp.row_lower),
        len(lp.a_value),
        int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMinimize),
        0.0,
        lp.cost,
        lp.col_lower,
        lp.col_upper,
        lp.row_lower,
        lp.row_upper,
        lp.a_start,
        lp.a_index,
        lp.a_value,
        _continuous(num_col),
    )
    highs.run()
    status = highs.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS ended with {highs.modelStatusToString(status)}")
    return np.asarray(highs.getSolution().col_value)


@lru_cache(maxsize=64)
def _continuous(num_col: int) -> np.ndarray:
    """Integrality of an LP's columns (all continuous), for HiGHS' pointer interface."""
    integrality = np.zeros(num_col, dtype=np.int32)
    integrality.flags.writeable = False
    return integrality


def solve_matrix_milp(lp: MatrixLP, integer: np.ndarray, spec: SolverSpec) -> np.ndarray:
    """Solve a MILP (columns where `integer` is true are integers) given in matrix form:
    HiGHS directly (its fast path), otherwise through a Pyomo model of the same matrix. Returns
    an optimal solution, or the incumbent when a time limit stops the search; raises
    SolverError when there is none (infeasible, or no incumbent in time)."""
    if not spec.uses_fast_path:
        return solve_with_pyomo(lp, spec, integer)
    import highspy

    highs = _highs_for(spec, mip=True)
    model = highs_lp(lp)
    kinds = highspy.HighsVarType
    model.integrality_ = [kinds.kInteger if i else kinds.kContinuous for i in integer]
    highs.passModel(model)
    highs.run()
    status = highs.getModelStatus()
    solution = highs.getSolution()
    has_point = bool(solution.value_valid)
    if status == highspy.HighsModelStatus.kOptimal or (
        status == highspy.HighsModelStatus.kTimeLimit and has_point
    ):
        return np.asarray(solution.col_value)
    raise SolverError(f"HiGHS ended with {highs.modelStatusToString(status)}")

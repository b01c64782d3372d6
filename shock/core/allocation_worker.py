"""The worker process of `allocation_ahead`: computes allocations of predicted inputs.

Started as `python -m shock.core.allocation_worker FD` with one end of a socket pair: it
reads its `WorkerSetup`, says "ready", then answers each request `(seq, PredictedJobs)` with
an `Answer`, always the newest request it has (older ones are obsolete). It stops on `None`
or when the connection closes (the run's process went away).
"""

from __future__ import annotations

import pickle
import signal
import sys
import time
from multiprocessing.connection import Connection

import numpy as np

from shock.core.allocation_ahead import Answer, NoJobViews, PredictedJobs, WorkerSetup
from shock.core.allocation_check import allocate_checked
from shock.core.matrix_lp import MatrixLP, solve_matrix_lp

# How long the worker polls for the next request before it sleeps on the connection (waking
# a sleeping process costs about as much as a small solve on a virtual machine).
_SPIN_S = 0.01


def answer(setup: WorkerSetup, seq: int, jobs: PredictedJobs) -> Answer:
    problem = jobs.input(setup.table)
    try:
        allocation = allocate_checked(setup.policy, problem, setup.solver)
    except NoJobViews:
        return Answer(seq, None, needs_job_views=True)
    except Exception:  # the run's own call, on the spot, reports it
        return Answer(seq, None)
    return Answer.of(seq, allocation, problem)


def warm_up(setup: WorkerSetup) -> None:
    """A run's first solve is slow (imports, the solver's first instance): make one on a
    one-variable LP before saying ready, so that the first real answer is not late."""
    if setup.solver.uses_fast_path:
        one = np.ones(1)
        lp = MatrixLP(
            cost=one,
            col_lower=np.zeros(1),
            col_upper=one,
            row_lower=np.full(1, -np.inf),
            row_upper=one,
            a_start=np.array([0, 1], dtype=np.int32),
            a_index=np.zeros(1, dtype=np.int32),
            a_value=one,
        )
        solve_matrix_lp(lp, setup.solver)


def send(connection: Connection, message: object) -> None:
    connection.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def serve(connection: Connection) -> None:
    setup = pickle.loads(connection.recv_bytes())
    assert isinstance(setup, WorkerSetup)
    warm_up(setup)
    send(connection, "ready")
    idle_since = time.perf_counter()
    while True:
        if not connection.poll(0):
            if time.perf_counter() - idle_since < _SPIN_S:
                continue
            connection.poll(None)
        request = pickle.loads(connection.recv_bytes())
        while request is not None and connection.poll(0):
            request = pickle.loads(connection.recv_bytes())  # a newer prediction replaces it
        if request is None:
            return
        seq, jobs = request
        send(connection, answer(setup, seq, jobs))
        idle_since = time.perf_counter()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run's process decides when to stop
    connection = Connection(int(sys.argv[1]))
    try:
        serve(connection)
    except (EOFError, OSError):
        pass  # the run's process went away
    except Exception:  # e.g. a policy it cannot unpickle: the run goes on without it
        sys.exit(1)
    finally:
        connection.close()


if __name__ == "__main__":
    main()

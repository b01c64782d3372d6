"""The worker process of `allocation_ahead`: computes allocations of predicted inputs.

Started as `python -m shock.core.allocation_worker FD` with one end of a socket pair: it
reads its `WorkerSetup`, says "ready", then answers each request `(seq, PredictedJobs,
NextStep | None)` with an `Answer`, always the newest request it has (older ones are
obsolete). It stops on `None` or when the connection closes (the run's process went away).

Between requests it does not wait idle: with a `NextStep` it predicts the allocation after the
one it answered and computes that one too. The run's next request is usually that input; it
is then answered at once.
"""

from __future__ import annotations

import pickle
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

from shock.core import matrix_lp
from shock.core.allocation_ahead import Answer, WorkerSetup
from shock.core.allocation_check import allocate_checked
from shock.core.allocation_prediction import (
    MISSING,
    ArrivalTable,
    NextStep,
    NoJobViews,
    PredictedJobs,
    predict_next,
    same_value,
)
from shock.core.matrix_lp import MatrixLP, solve_matrix_lp
from shock.core.nonblocking_socket import NonBlockingSocket
from shock.core.throughputs import ThroughputTable

# How long the worker polls for the next request before it sleeps on the connection (waking
# a sleeping process costs about as much as a small solve on a virtual machine).
_SPIN_S = 0.01


@dataclass(frozen=True, slots=True)
class _Guess:
    """An allocation computed for a predicted input nobody asked for yet."""

    jobs: PredictedJobs
    answer: Answer

    def answers(self, jobs: PredictedJobs, table: ThroughputTable) -> bool:
        """Whether it is the allocation of `jobs`: equal in every field it read."""
        guessed = self.jobs
        for name in self.answer.fields_read:
            if name == "job_ids":  # (as arrays: the same ids as the tuples the input has)
                asked, mine = jobs.job_ids, guessed.job_ids
            else:
                asked, mine = jobs.value(name, table, ()), guessed.value(name, table, ())
            if asked is MISSING or not same_value(asked, mine):
                return False
        return True


def guess_next(
    setup: WorkerSetup,
    jobs: PredictedJobs,
    answered: Answer,
    step: NextStep,
    arrivals: ArrivalTable,
) -> _Guess | None:
    """The allocation after `answered` (the allocation of `jobs`), as predicted by `step`."""
    if answered.fractions is None or answered.keys is not None:
        return None  # (keys of its own: not one row per job)
    predicted = predict_next(jobs, answered.fractions, step, arrivals)
    if predicted is None:
        return None
    return _Guess(predicted, answer(setup, 0, predicted))


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
    matrix_lp.lp_threads = 1  # (before the first instance: see there)
    side = NonBlockingSocket(connection.fileno())
    setup = pickle.loads(connection.recv_bytes())
    assert isinstance(setup, WorkerSetup)
    warm_up(setup)
    send(connection, "ready")
    guess: _Guess | None = None
    arrivals: ArrivalTable | None = None
    idle_since = time.perf_counter()
    while True:
        if not side.waiting():
            if time.perf_counter() - idle_since < _SPIN_S:
                continue
            connection.poll(None)
        # Everything that came: the arrivals to keep, the newest request (a newer prediction
        # replaces an older one), or the stop.
        request = None
        while True:
            message = pickle.loads(connection.recv_bytes())
            if message is None:
                return
            if isinstance(message, ArrivalTable):
                arrivals = message
            else:
                request = message
            if not side.waiting():
                break
        if request is None:
            continue
        seq, jobs, step = request
        if guess is not None and guess.answers(jobs, setup.table):
            answered = guess.answer.again(seq)
        else:
            answered = answer(setup, seq, jobs)
        send(connection, answered)
        guess = None
        if step is not None and arrivals is not None and not side.waiting():
            guess = guess_next(setup, jobs, answered, step, arrivals)
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

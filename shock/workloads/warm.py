"""`python -m shock.workloads.warm`: a job process started before its launch.

A worker agent keeps a few of these ready (`shock/cluster/warm.py`). Each imports torch and
the harness, the slow part of a job's start (seconds on a loaded CPU), then waits for its
launch: one JSON line on stdin, `{"argv": [the job's arguments], "stderr": "path"}`. From
then on it is exactly `python -m shock.workloads.run ARGV`, with its stderr in that file.
Closing its stdin before the launch ends it quietly.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    # The imports a launch would otherwise wait for.
    import torch  # noqa: F401

    import shock.workloads.harness  # noqa: F401
    from shock.workloads.run import main as run_main

    line = sys.stdin.readline()
    if not line.strip():
        return 0  # never launched
    try:
        launch = json.loads(line)
        argv = [str(arg) for arg in launch["argv"]]
        stderr = launch.get("stderr")
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        print(json.dumps({"type": "error", "message": f"bad warm launch line: {exc}"}), flush=True)
        return 1
    if isinstance(stderr, str) and stderr:
        descriptor = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(descriptor, sys.stderr.fileno())
        os.close(descriptor)
    return run_main(argv)


if __name__ == "__main__":
    from shock.workloads.run import exit_now

    exit_now(main())

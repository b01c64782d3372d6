"""Jobs' segments for the timeline: consecutive rounds a job ran on one worker type and GPU
count, merged into one (start round, end, worker type, GPUs).

Rounds come in as arrays of their jobs (by the job's dense index). A round of a few dozen jobs
costs numpy's per-call overhead, not per element, so such rounds wait in a batch and the
batch is merged in one pass: its entries sorted by job, each job's rounds in order, cut where
a job skipped a round or changed type or GPU count. A batch is merged once it holds enough
rounds or jobs (a large round fills one by itself; a batch of one round needs no sort). Either
way every segment comes out the same as merging round by round.
"""

from __future__ import annotations

import numpy as np

# Stands for "no open segment": never the round before a recorded one.
NO_ROUND = -2
# Merges of closed segments gathered into one block: fewer, larger arrays.
_BLOCK_MERGES = 256
# Rounds wait to be merged until this many have, or until their jobs add up to
# `BATCH_ENTRIES` (a round with that many on its own is merged at once, with any before it).
BATCH_ROUNDS = 256
BATCH_ENTRIES = 1 << 14


class OpenSegments:
    """Each job's last segment, one array per field indexed by the job's dense index. The
    segment starts at its first round's start."""

    def __init__(self) -> None:
        self.size = 0
        self.first = np.zeros(0, dtype=np.int32)  # round the segment started in
        self.end = np.zeros(0, dtype=np.float64)
        self.column = np.zeros(0, dtype=np.uint16)
        self.gpus = np.zeros(0, dtype=np.uint16)
        self.last = np.zeros(0, dtype=np.int32)  # round it last ran in (NO_ROUND: none)

    def make_room(self, jobs: int) -> None:
        if jobs <= self.size:
            return
        size = max(jobs, 2 * self.size, 1024)
        for name, fill in (("first", 0), ("end", 0.0), ("column", 0), ("gpus", 0),
                           ("last", NO_ROUND)):  # fmt: skip
            old = getattr(self, name)
            grown = np.full(size, fill, dtype=old.dtype)
            grown[: self.size] = old
            setattr(self, name, grown)
        self.size = size


class ClosedSegments:
    """Segments a job left (it ran elsewhere, or paused), each job's in the order they
    closed, as columns: job index, first round, end, worker-type column, GPUs (20 bytes a
    segment). Each column is a list of blocks: a merge's segments are added as arrays, and
    every few hundred merges those arrays are joined into one block (joining everything each
    time would copy the whole history again and again)."""

    DTYPES = (np.int32, np.int32, np.float64, np.uint16, np.uint16)

    def __init__(self) -> None:
        self.blocks: list[list[np.ndarray]] = [[] for _ in self.DTYPES]
        self.recent: list[list[np.ndarray]] = [[] for _ in self.DTYPES]

    def add(self, segments: tuple[np.ndarray, ...]) -> None:
        recent = self.recent
        for parts, values, dtype in zip(recent, segments, self.DTYPES, strict=True):
            parts.append(values.astype(dtype, copy=False))
        if len(recent[0]) >= _BLOCK_MERGES:
            for blocks, parts in zip(self.blocks, recent, strict=True):
                blocks.append(np.concatenate(parts))
                parts.clear()

    def joined_with(self, still_open: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Each column joined into one array, followed by `still_open`'s. Column by column,
        so that only one column is ever held twice; the closed ones keep a view of it."""
        joined = []
        for blocks, parts, values in zip(self.blocks, self.recent, still_open, strict=True):
            closed = sum(len(block) for block in blocks) + sum(len(part) for part in parts)
            column = np.concatenate((*blocks, *parts, values))
            blocks[:] = [column[:closed]]
            parts.clear()
            joined.append(column)
        return tuple(joined)


class SegmentBuilder:
    """Merges rounds' runs into segments: `ran` per round, `merge` before reading them."""

    def __init__(self) -> None:
        self.open = OpenSegments()
        self.closed = ClosedSegments()
        # The rounds waiting to be merged, field by field.
        self._rounds: list[int] = []
        self._starts: list[float] = []
        self._positions: list[np.ndarray] = []
        self._exec_s: list[np.ndarray] = []
        self._stopped_s: list[np.ndarray] = []
        self._columns: list[np.ndarray] = []
        self._gpus: list[np.ndarray] = []
        self._entries = 0

    def ran(
        self,
        index: int,
        start_s: float,
        positions: np.ndarray,
        exec_s: np.ndarray,
        stopped_s: np.ndarray,
        columns: np.ndarray,
        gpus: np.ndarray,
        jobs: int,
    ) -> None:
        """Round `index`, started at `start_s`, ran the jobs at `positions` (distinct) for
        `exec_s` each, on these worker-type columns and GPU counts; a job stopped at
        `stopped_s` (its finish, if it finished in the round). The arrays are kept until the
        round is merged: the caller must not change them. `jobs` is how many job indexes
        exist."""
        self._rounds.append(index)
        self._starts.append(start_s)
        self._positions.append(positions)
        self._exec_s.append(exec_s)
        self._stopped_s.append(stopped_s)
        self._columns.append(columns)
        self._gpus.append(gpus)
        self._entries += len(positions)
        if self._entries >= BATCH_ENTRIES or len(self._rounds) >= BATCH_ROUNDS:
            self.merge(jobs)

    def merge(self, jobs: int) -> None:
        """Merge the waiting rounds into the segments."""
        rounds = self._rounds
        if not rounds:
            return
        counts = list(map(len, self._positions))
        positions = np.concatenate(self._positions)
        round_of = np.repeat(np.array(rounds, dtype=np.int32), counts)
        start = np.repeat(np.array(self._starts, dtype=np.float64), counts)
        # A job that finished early stops holding its GPUs then.
        held = start + np.concatenate(self._exec_s)
        stopped = np.concatenate(self._stopped_s)
        end = np.where((stopped > held) | (stopped < start), held, stopped)
        columns = np.concatenate(self._columns)
        gpus = np.concatenate(self._gpus)
        if len(rounds) > 1:
            # Each job's entries together, in round order (stable: rounds came in order).
            by_job = np.argsort(positions, kind="stable")
            positions, round_of = positions[by_job], round_of[by_job]
            end, columns, gpus = end[by_job], columns[by_job], gpus[by_job]
        for waiting in (rounds, self._starts, self._positions, self._exec_s, self._stopped_s,
                        self._columns, self._gpus):  # fmt: skip
            waiting.clear()
        self._entries = 0
        self._merge_sorted(positions, round_of, end, columns, gpus, jobs)

    def _merge_sorted(
        self,
        positions: np.ndarray,
        round_of: np.ndarray,
        end: np.ndarray,
        columns: np.ndarray,
        gpus: np.ndarray,
        jobs: int,
    ) -> None:
        """Merge entries sorted by job, each job's in round order."""
        entries = len(positions)
        if not entries:
            return
        segments = self.open
        segments.make_room(jobs)
        # A job's first entry here follows its open segment; a later one the entry before.
        first = np.empty(entries, dtype=bool)
        first[0] = True
        np.not_equal(positions[1:], positions[:-1], out=first[1:])
        all_first = bool(first.all())  # (always, for one round)
        firsts = np.arange(entries) if all_first else np.flatnonzero(first)
        job = positions[firsts]
        open_last = segments.last[job]
        # Continues the segment before it: the next round, the same type and GPU count.
        joins_open = (
            (open_last == round_of[firsts] - 1)
            & (segments.column[job] == columns[firsts])
            & (segments.gpus[job] == gpus[firsts])
        )
        # Open segments that a job's first entry here closes (a job had one, and left it).
        closing = job[~joins_open & (open_last != NO_ROUND)]
        closed_open = (
            closing,
            segments.first[closing],
            segments.end[closing],
            segments.column[closing],
            segments.gpus[closing],
        )
        if all_first:
            # Each job once: its segment is its open one extended, or a new one.
            segment_first = np.where(joins_open, segments.first[job], round_of)
            if len(closing):
                self.closed.add(closed_open)
            last = positions
        else:
            joins = np.empty(entries, dtype=bool)
            joins[0] = False
            joins[1:] = (
                (round_of[1:] == round_of[:-1] + 1)
                & (columns[1:] == columns[:-1])
                & (gpus[1:] == gpus[:-1])
            )
            joins[firsts] = joins_open
            # Each entry's segment starts at the last entry that began one or was a job's
            # first here (whose start is its open segment's, where it joins that).
            anchor = ~joins
            anchor[firsts] = True
            anchors = np.flatnonzero(anchor)
            anchor_first = round_of[anchors]
            joined_open = joins[anchors]
            anchor_first[joined_open] = segments.first[positions[anchors[joined_open]]]
            anchor_of = np.maximum.accumulate(np.where(anchor, np.arange(entries), 0))
            starts = np.empty(entries, dtype=np.int32)
            starts[anchors] = anchor_first
            segment_first = starts[anchor_of]
            # An entry that begins a segment, not its job's first here, closes the one before.
            before = np.flatnonzero(~joins & ~first) - 1
            closed_here = (
                positions[before],
                segment_first[before],
                end[before],
                columns[before],
                gpus[before],
            )
            # Each job's closed segments stay in time order: the open one closed first.
            self.closed.add(
                tuple(
                    np.concatenate((a, b.astype(a.dtype, copy=False)))
                    for a, b in zip(closed_open, closed_here, strict=True)
                )
            )
            # Each job's last entry is its open segment now.
            lasts = np.empty(entries, dtype=bool)
            lasts[-1] = True
            lasts[:-1] = first[1:]
            at_last = np.flatnonzero(lasts)
            last = positions[at_last]
            segment_first = segment_first[at_last]
            round_of, end = round_of[at_last], end[at_last]
            columns, gpus = columns[at_last], gpus[at_last]
        segments.first[last] = segment_first
        segments.end[last] = end
        segments.column[last] = columns
        segments.gpus[last] = gpus
        segments.last[last] = round_of

    def columns(self, jobs: int) -> tuple[np.ndarray, ...]:
        """Every segment, closed then still open (copies: recording goes on), as columns:
        job index, first round, end, worker-type column, GPUs."""
        self.merge(jobs)
        segments = self.open
        segments.make_room(jobs)
        still_open = np.flatnonzero(segments.last[:jobs] != NO_ROUND)
        return self.closed.joined_with(
            (
                still_open.astype(np.int32),
                segments.first[still_open],
                segments.end[still_open],
                segments.column[still_open],
                segments.gpus[still_open],
            )
        )

"""How a job talks to its agent: a small channel interface, over stdio or in memory (tests)."""

from __future__ import annotations

import json
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol, TextIO

from shock.job.messages import Command, JobMessage, ProtocolError, parse_command


class Channel(Protocol):
    def send(self, message: JobMessage) -> None:
        """Deliver one message to the agent."""
        ...

    def receive(self) -> list[Command]:
        """Every command that arrived since the last call; never blocks."""
        ...

    def connected(self) -> bool:
        """False once the agent can no longer be reached (its end of the channel closed)."""
        ...


class StdioChannel:
    """JSON lines: messages on `output` (the job's stdout), commands read from `input` (stdin).

    A reader thread collects commands so the training loop only polls at iteration boundaries.
    A malformed line is reported on stderr and skipped; EOF just ends the reader. A write
    to a closed stdout (the agent died) marks the channel disconnected instead of raising.
    """

    def __init__(self, output: TextIO, input: TextIO, errors: TextIO = sys.stderr) -> None:
        self._output = output
        self._errors = errors
        self._inbox: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._connected = True
        self._reader = threading.Thread(target=self._read, args=(input,), daemon=True)
        self._reader.start()

    def send(self, message: JobMessage) -> None:
        # Strict JSON: a NaN or Infinity would break agents in other languages.
        line = json.dumps(message.to_dict(), separators=(",", ":"), allow_nan=False)
        with self._lock:
            if not self._connected:
                return
            try:
                self._output.write(line + "\n")
                self._output.flush()
            except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
                self._connected = False

    def connected(self) -> bool:
        return self._connected

    def receive(self) -> list[Command]:
        commands = []
        while True:
            try:
                commands.append(self._inbox.get_nowait())
            except queue.Empty:
                return commands

    def _read(self, input: TextIO) -> None:
        for number, line in enumerate(input, start=1):
            if not line.strip():
                continue
            try:
                self._inbox.put(parse_command(json.loads(line)))
            except (json.JSONDecodeError, ProtocolError) as exc:
                print(f"stdin line {number}: ignored: {exc}", file=self._errors, flush=True)


class MemoryChannel:
    """An in-process channel: records what the job sends; `react` may answer with commands."""

    def __init__(self, react: Callable[[JobMessage], list[Command]] | None = None) -> None:
        self.sent: list[JobMessage] = []
        self.agent_connected = True
        self._inbox: deque[Command] = deque()
        self._react = react

    def push(self, command: Command) -> None:
        self._inbox.append(command)

    def send(self, message: JobMessage) -> None:
        self.sent.append(message)
        if self._react is not None:
            self._inbox.extend(self._react(message))

    def receive(self) -> list[Command]:
        commands = list(self._inbox)
        self._inbox.clear()
        return commands

    def connected(self) -> bool:
        return self.agent_connected


class NullChannel:
    """A local session's channel: no agent, nothing to tell, never preempted."""

    def send(self, message: JobMessage) -> None:
        pass

    def receive(self) -> list[Command]:
        return []

    def connected(self) -> bool:
        return True

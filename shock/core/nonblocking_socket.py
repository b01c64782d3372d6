"""A local socket's other side, used without blocking: peek whether a message waits, send
what fits now.

Peeking without poll(): a process inside poll() or select() sits on the socket's wait queue,
and every write to the socket then pays for waking it (tens of microseconds on a virtual
machine, where a wake-up is an interrupt between virtual CPUs). The allocation look-ahead's
two processes spin while they expect a message (a sleeping process is slow to wake); spinning
on a non-blocking peek leaves the wait queue empty, so each side's writes cost a plain copy.

Sending without blocking: two processes that both block sending to each other, each with
the other's buffer full, wait for ever. The run's process sends in pieces, and reads what the
worker sent whenever the worker's buffer is full.
"""

from __future__ import annotations

import os
import select
import socket

_DONT_WAIT = getattr(socket, "MSG_DONTWAIT", 0)


class NonBlockingSocket:
    """The socket behind a connection's file descriptor (its own duplicate)."""

    def __init__(self, fd: int) -> None:
        self._socket = socket.socket(fileno=os.dup(fd))

    def waiting(self) -> bool:
        """Whether a read would not block: a message (or the end of the connection, or an
        error, which the read then reports) is there."""
        if not _DONT_WAIT:  # (no such flag here: ask select, which does not sleep either)
            return bool(select.select([self._socket], [], [], 0)[0])
        try:
            self._socket.recv(1, socket.MSG_PEEK | _DONT_WAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True

    def send_some(self, data: memoryview) -> int:
        """Send as much of `data` as fits now; how much that was (0: nothing fits)."""
        if not _DONT_WAIT:
            if not select.select([], [self._socket], [], 0)[1]:
                return 0
            return self._socket.send(data[:1])  # (a byte is sure not to block)
        try:
            return self._socket.send(data, _DONT_WAIT)
        except BlockingIOError:
            return 0

    def wait(self, timeout_s: float) -> None:
        """Sleep until something can be read or sent, or `timeout_s` has passed."""
        select.select([self._socket], [self._socket], [], timeout_s)

    def close(self) -> None:
        self._socket.close()

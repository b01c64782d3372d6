"""Whether a message waits on a local socket, asked without poll().

A process inside poll() or select() sits on the socket's wait queue, and every write to the
socket then pays for waking it: tens of microseconds on a virtual machine, where a wake-up is
an interrupt between virtual CPUs. The allocation look-ahead's two processes spin while they
expect a message (a sleeping process is slow to wake); spinning on a non-blocking peek leaves
the wait queue empty, so each side's writes cost a plain copy.
"""

from __future__ import annotations

import os
import select
import socket

_DONT_WAIT = getattr(socket, "MSG_DONTWAIT", 0)


class SocketPeek:
    """Peeks at the socket behind a connection's file descriptor (its own duplicate)."""

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

    def close(self) -> None:
        self._socket.close()

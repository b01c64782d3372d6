"""Peeking at a socket says whether a read would block, without reading anything."""

from __future__ import annotations

import socket

from shock.core.socket_peek import SocketPeek


def test_a_peek_sees_a_message_and_the_end_of_the_connection_without_reading() -> None:
    ours, theirs = socket.socketpair()
    peek = SocketPeek(ours.fileno())
    try:
        assert not peek.waiting()
        theirs.sendall(b"abc")
        assert peek.waiting()
        assert peek.waiting()  # (still there: peeking reads nothing)
        assert ours.recv(3) == b"abc"
        assert not peek.waiting()
        theirs.close()
        assert peek.waiting()  # the end of the connection: a read returns at once
        assert ours.recv(1) == b""
    finally:
        peek.close()
        ours.close()

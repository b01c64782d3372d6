"""Peeking at a socket says whether a read would block, without reading anything."""

from __future__ import annotations

import socket

from shock.core.nonblocking_socket import NonBlockingSocket


def test_a_peek_sees_a_message_and_the_end_of_the_connection_without_reading() -> None:
    ours, theirs = socket.socketpair()
    side = NonBlockingSocket(ours.fileno())
    try:
        assert not side.waiting()
        theirs.sendall(b"abc")
        assert side.waiting()
        assert side.waiting()  # (still there: peeking reads nothing)
        assert ours.recv(3) == b"abc"
        assert not side.waiting()
        theirs.close()
        assert side.waiting()  # the end of the connection: a read returns at once
        assert ours.recv(1) == b""
    finally:
        side.close()
        ours.close()


def test_sending_sends_what_fits_and_nothing_once_the_buffer_is_full() -> None:
    ours, theirs = socket.socketpair()
    side = NonBlockingSocket(ours.fileno())
    try:
        data = memoryview(bytes(64 << 20))  # more than any socket buffer holds
        sent = side.send_some(data)
        assert 0 < sent < len(data)
        assert side.send_some(data[sent:]) == 0  # full: nothing more until the peer reads
        assert len(theirs.recv(1 << 16)) > 0
    finally:
        side.close()
        ours.close()
        theirs.close()

"""The transport over real unix sockets: descriptors arrive, extra ones are closed, lies refused."""

from __future__ import annotations

import array
import os
import socket
import time
from collections.abc import Iterator

import pytest

from podwright.adapters.fuse.errors import TransportError
from podwright.adapters.fuse.transport import FdTransport, PeerClosedError
from podwright.core.fuse_proxy.protocol import (
    MountRequest,
    PingRequest,
    ProtocolError,
    decode_request,
    encode_request,
)


def open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, FdTransport]]:
    before = open_fds()
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    receiver = FdTransport(right)
    yield left, receiver
    left.close()
    receiver.close()
    assert open_fds() <= before | {left.fileno(), right.fileno()} - {-1}


def soon() -> float:
    return time.monotonic() + 5


def test_a_frame_and_its_descriptor_arrive_together(
    pair: tuple[socket.socket, FdTransport],
) -> None:
    left, receiver = pair
    read_end, write_end = os.pipe()
    FdTransport(left).send(
        encode_request(MountRequest("/mnt/x", ("ro",)), fd_attached=True), read_end
    )
    frame, fd = receiver.receive(soon())
    assert decode_request(frame) == MountRequest("/mnt/x", ("ro",))
    assert fd is not None
    assert fd != read_end
    assert os.get_inheritable(fd) is False
    os.write(write_end, b"through")
    assert os.read(fd, 7) == b"through"
    for descriptor in (fd, read_end, write_end):
        os.close(descriptor)


def test_a_frame_sent_one_byte_at_a_time_is_reassembled(
    pair: tuple[socket.socket, FdTransport],
) -> None:
    left, receiver = pair
    for byte in encode_request(PingRequest()):
        left.send(bytes([byte]))
    frame, fd = receiver.receive(soon())
    assert (decode_request(frame), fd) == (PingRequest(), None)


def send_with_fds(sock: socket.socket, data: bytes, count: int) -> None:
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(count)]
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())])
    for fd in fds:
        os.close(fd)


@pytest.mark.parametrize(
    ("flagged", "sent", "message"),
    [
        (True, 0, "carries 1 descriptor\\(s\\), 0 arrived"),
        (False, 1, "carries 0 descriptor\\(s\\), 1 arrived"),
        (True, 2, "2 descriptors arrived, at most 1 may"),
        (False, 8, "4 descriptors arrived, at most 1 may"),  # the kernel drops the rest
    ],
)
def test_descriptors_that_do_not_match_the_flag_are_refused_and_closed(
    pair: tuple[socket.socket, FdTransport], flagged: bool, sent: int, message: str
) -> None:
    left, receiver = pair
    send_with_fds(left, encode_request(PingRequest(), fd_attached=flagged), sent)
    with pytest.raises(ProtocolError, match=message):
        receiver.receive(soon())
    # the fixture checks that every received descriptor was closed


def test_bytes_after_the_frame_are_refused(pair: tuple[socket.socket, FdTransport]) -> None:
    left, receiver = pair
    left.sendall(encode_request(PingRequest()) * 2)
    with pytest.raises(ProtocolError, match="one frame per connection"):
        receiver.receive(soon())


def test_a_peer_that_leaves_early_is_reported(pair: tuple[socket.socket, FdTransport]) -> None:
    left, receiver = pair
    left.sendall(encode_request(PingRequest())[:5])
    left.shutdown(socket.SHUT_WR)
    with pytest.raises(PeerClosedError, match="closed the connection after 5 bytes"):
        receiver.receive(soon())


def test_a_silent_peer_times_out(pair: tuple[socket.socket, FdTransport]) -> None:
    _, receiver = pair
    with pytest.raises(TransportError, match="timed out waiting for the peer"):
        receiver.receive(time.monotonic() + 0.05)


def test_sending_to_a_closed_peer_is_a_transport_error() -> None:
    left, right = socket.socketpair()
    right.close()
    transport = FdTransport(left)
    with pytest.raises(TransportError, match="cannot send to the peer"):
        transport.send(encode_request(PingRequest()), None, 1.0)
    transport.close()

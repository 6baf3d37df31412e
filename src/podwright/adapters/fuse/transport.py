"""The one class that owns sendmsg/recvmsg and SCM_RIGHTS for the FUSE proxy's unix socket.

Both ends speak :mod:`podwright.core.fuse_proxy.protocol` over a connected ``AF_UNIX`` stream
socket, one request and one reply per connection. A frame may carry one file descriptor, and
this class is where descriptors cross the process boundary, so it is strict about them: every
descriptor received is opened close-on-exec, counted against the frame's fd-attached flag, and
closed by :meth:`FdTransport.close` unless the caller took it; truncated ancillary data, extra
descriptors and bytes after the frame are protocol errors.
"""

from __future__ import annotations

import array
import contextlib
import os
import socket
import time

from podwright.adapters.fuse.errors import TransportError
from podwright.core.fuse_proxy.protocol import Frame, FrameDecoder, ProtocolError

_MAX_FDS_PER_MESSAGE = 4
"""Room for more descriptors than a frame may carry, so that extra ones are seen and closed."""
_ANCILLARY_SIZE = socket.CMSG_SPACE(_MAX_FDS_PER_MESSAGE * array.array("i").itemsize)
_RECEIVE_SIZE = 4096


class PeerClosedError(TransportError):
    """The peer closed the connection before a whole frame arrived."""


class FdTransport:
    """A connected unix stream socket that sends and receives frames with their descriptor."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._decoder = FrameDecoder()
        self._received_fds: list[int] = []
        self._frame: Frame | None = None

    def send(self, data: bytes, fd: int | None = None, timeout: float | None = None) -> None:
        """Send one encoded frame, with ``fd`` attached to its first byte when given."""
        self.sock.settimeout(timeout)
        try:
            if fd is None:
                self.sock.sendall(data)
                return
            rights = array.array("i", [fd]).tobytes()
            sent = self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
            if sent < len(data):
                self.sock.sendall(data[sent:])
        except TimeoutError as error:
            raise TransportError("timed out sending to the peer") from error
        except OSError as error:
            raise TransportError(f"cannot send to the peer: {error.strerror or error}") from error

    def receive(self, deadline: float) -> tuple[Frame, int | None]:
        """Block until one whole frame has arrived or ``deadline`` (``time.monotonic``) passes."""
        while self._frame is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportError("timed out waiting for the peer")
            self.sock.settimeout(remaining)
            try:
                self.pump()
            except TimeoutError as error:
                raise TransportError("timed out waiting for the peer") from error
        return self.take()

    def pump(self) -> bool:
        """Read what the socket has (one ``recvmsg``); True once a whole frame is in.

        On a non-blocking socket with nothing to read this raises ``BlockingIOError``.
        """
        if self._frame is not None:
            return True
        try:
            data, ancillary, flags, _ = self.sock.recvmsg(
                _RECEIVE_SIZE, _ANCILLARY_SIZE, socket.MSG_CMSG_CLOEXEC
            )
        except (BlockingIOError, TimeoutError):
            raise
        except OSError as error:
            raise TransportError(f"cannot read from the peer: {error.strerror or error}") from error
        self._keep_fds(ancillary)
        if flags & socket.MSG_CTRUNC:
            raise ProtocolError("more descriptors arrived than a frame may carry")
        if not data:
            raise PeerClosedError(
                "the peer closed the connection"
                + (f" after {self._decoder.buffered} bytes" if self._decoder.buffered else "")
            )
        frames = self._decoder.feed(data)
        if len(frames) > 1 or (frames and self._decoder.buffered):
            raise ProtocolError("bytes follow the frame; one frame per connection")
        if not frames:  # the decoder bounds what it buffers by the header's checked length
            return False
        frame = frames[0]
        expected = 1 if frame.fd_attached else 0
        if len(self._received_fds) != expected:
            raise ProtocolError(
                f"the frame says it carries {expected} descriptor(s), "
                f"{len(self._received_fds)} arrived"
            )
        self._frame = frame
        return True

    def take(self) -> tuple[Frame, int | None]:
        """The complete frame and its descriptor, which the caller now owns and must close."""
        if self._frame is None:
            raise ValueError("no complete frame yet")
        frame, self._frame = self._frame, None
        fd = self._received_fds.pop() if self._received_fds else None
        return frame, fd

    def _keep_fds(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                usable = len(payload) - len(payload) % fds.itemsize
                fds.frombytes(payload[:usable])
                self._received_fds.extend(fds)
        if len(self._received_fds) > 1:
            raise ProtocolError(f"{len(self._received_fds)} descriptors arrived, at most 1 may")

    def close(self) -> None:
        """Close the socket and every received descriptor nobody took."""
        fds, self._received_fds = self._received_fds, []
        for fd in fds:
            _close_quietly(fd)
        self.sock.close()


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)

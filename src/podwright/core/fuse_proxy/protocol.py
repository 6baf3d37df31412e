"""The FUSE proxy's wire protocol, sans I/O: frames in and out of bytes, requests and replies.

A privileged daemon on every node reads these frames from any container that can reach its
socket, so the decoder assumes every byte is hostile: it is bounded (a frame never exceeds
:data:`MAX_FRAME`), versioned, rejects anything it does not understand, and says exactly why.
No socket is touched here; :mod:`podwright.adapters.fuse.transport` moves the bytes and the one
file descriptor a frame may carry.

A frame is a 12-byte header and a payload::

    magic "PWFP" | version u8 | kind u8 | flags u8 | reserved u8 (0) | payload length u32 BE

A connection carries one request and its reply; a mount's reply is acknowledged by the client
with a :class:`Received` frame. ``flags`` has one bit, :data:`FD_ATTACHED`: the frame arrives
with exactly one file descriptor (SCM_RIGHTS). The payload is a sequence of fields, each
``tag u8 | length u16 BE | value``. Strings are bytes on the wire (paths are whatever bytes
the file system holds), decoded with ``surrogateescape`` so that any path survives a round trip.

This module (with the rest of the shim's modules) uses the standard library only: the shim is
installed into workload images as a self-contained zipapp (:mod:`podwright.adapters.fuse.bundle`).
"""

from __future__ import annotations

import dataclasses
import struct

DEFAULT_NAMESPACE = "podwright-system"
"""The namespace the daemon is installed in, unless told otherwise."""
DEFAULT_SOCKET_DIR = "/var/run/fusermount"
"""The host directory shared by the daemon and the pods (the reference design's path)."""
SOCKET_NAME = "podwright-fuse-proxy.sock"
DEFAULT_SOCKET_PATH = f"{DEFAULT_SOCKET_DIR}/{SOCKET_NAME}"
SOCKET_ENV = "PODWRIGHT_FUSE_PROXY_SOCKET"
"""Where clients look for the daemon's socket when it is not at :data:`DEFAULT_SOCKET_PATH`."""

MAGIC = b"PWFP"
VERSION = 1
HEADER = struct.Struct(">4sBBBBI")
FIELD_HEADER = struct.Struct(">BH")
MAX_PAYLOAD = 16 * 1024
MAX_FRAME = HEADER.size + MAX_PAYLOAD
MAX_PATH_BYTES = 4095
MAX_OPTIONS_BYTES = 4096
MAX_MESSAGE_BYTES = 4096

FD_ATTACHED = 0x01
_KNOWN_FLAGS = FD_ATTACHED


class Kind:
    """The kind byte of a frame: requests below 0x80, replies from 0x80."""

    MOUNT = 0x01
    UNMOUNT = 0x02
    PING = 0x03
    RECEIVED = 0x04
    MOUNTED = 0x81
    DONE = 0x82
    FAILED = 0x83


_KIND_NAMES = {
    Kind.MOUNT: "mount",
    Kind.UNMOUNT: "unmount",
    Kind.PING: "ping",
    Kind.RECEIVED: "received",
    Kind.MOUNTED: "mounted",
    Kind.DONE: "done",
    Kind.FAILED: "failed",
}


class Tag:
    """The tag byte of a payload field."""

    MOUNTPOINT = 0x01
    OPTION = 0x02
    LAZY = 0x03
    ERRNO = 0x04
    MESSAGE = 0x05


class ProtocolError(ValueError):
    """Bytes that are not a valid frame or message; the reason says which part and why."""


@dataclasses.dataclass(frozen=True)
class Frame:
    """One decoded frame: its kind, whether a file descriptor came with it, and its fields."""

    kind: int
    fd_attached: bool
    fields: tuple[tuple[int, bytes], ...]


@dataclasses.dataclass(frozen=True)
class MountRequest:
    """Mount a FUSE file system at ``mountpoint`` for the caller, with fusermount's ``-o``."""

    mountpoint: str
    options: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class UnmountRequest:
    """Unmount the caller's FUSE file system at ``mountpoint`` (``lazy``: MNT_DETACH)."""

    mountpoint: str
    lazy: bool = False


@dataclasses.dataclass(frozen=True)
class PingRequest:
    """Is the daemon serving? (For liveness probes and tests.)"""


@dataclasses.dataclass(frozen=True)
class Received:
    """The client's acknowledgement, on the same connection, that it holds the mounted fd.

    A mount nobody acknowledges (the caller died, or left) is detached by the daemon, so a
    request cut short never leaves a mount that no process serves.
    """


@dataclasses.dataclass(frozen=True)
class Mounted:
    """The mount succeeded; the frame carries the mounted ``/dev/fuse`` descriptor."""


@dataclasses.dataclass(frozen=True)
class Done:
    """An unmount or a ping succeeded."""


@dataclasses.dataclass(frozen=True)
class Failed:
    """The daemon refused or failed the request: an errno and a message for the user."""

    errno: int
    message: str


Request = MountRequest | UnmountRequest | PingRequest | Received
Reply = Mounted | Done | Failed


def encode_frame(kind: int, fields: list[tuple[int, bytes]], fd_attached: bool = False) -> bytes:
    """The bytes of one frame; raises :class:`ProtocolError` when it would exceed the limits."""
    payload = bytearray()
    for tag, value in fields:
        if len(value) > 0xFFFF:
            raise ProtocolError(f"field {tag:#04x} is {len(value)} bytes, at most 65535 fit")
        payload += FIELD_HEADER.pack(tag, len(value))
        payload += value
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"payload of {len(payload)} bytes exceeds the {MAX_PAYLOAD}-byte limit")
    flags = FD_ATTACHED if fd_attached else 0
    return HEADER.pack(MAGIC, VERSION, kind, flags, 0, len(payload)) + bytes(payload)


class FrameDecoder:
    """Incremental decoder for one stream: feed bytes as they arrive, take frames as they complete.

    The header is checked as soon as its bytes are in, so a hostile peer is turned away after at
    most 12 bytes, never after it has sent a large payload. After an error the decoder is spent.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._failed = False

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data``; return the frames it completed, in order."""
        if self._failed:
            raise ProtocolError("the stream already failed to decode")
        self._buffer += data
        frames: list[Frame] = []
        try:
            while True:
                frame = self._take_frame()
                if frame is None:
                    return frames
                frames.append(frame)
        except ProtocolError:
            self._failed = True
            raise

    @property
    def buffered(self) -> int:
        """Bytes received that belong to a frame not yet complete."""
        return len(self._buffer)

    def _take_frame(self) -> Frame | None:
        buffer = self._buffer
        if len(buffer) >= len(MAGIC) and buffer[: len(MAGIC)] != MAGIC:
            raise ProtocolError(f"bad magic {bytes(buffer[:4])!r}, expected {MAGIC!r}")
        if len(buffer) < HEADER.size:
            return None
        _, version, kind, flags, reserved, length = HEADER.unpack_from(buffer)
        if version != VERSION:
            raise ProtocolError(f"protocol version {version} is not supported (only {VERSION})")
        if kind not in _KIND_NAMES:
            raise ProtocolError(f"unknown frame kind {kind:#04x}")
        if flags & ~_KNOWN_FLAGS:
            raise ProtocolError(f"unknown flags {flags & ~_KNOWN_FLAGS:#04x}")
        if reserved != 0:
            raise ProtocolError(f"reserved header byte is {reserved}, must be 0")
        if length > MAX_PAYLOAD:
            raise ProtocolError(f"payload length {length} exceeds the {MAX_PAYLOAD}-byte limit")
        if len(buffer) < HEADER.size + length:
            return None
        payload = bytes(buffer[HEADER.size : HEADER.size + length])
        del buffer[: HEADER.size + length]
        return Frame(kind, bool(flags & FD_ATTACHED), _decode_fields(payload))


def _decode_fields(payload: bytes) -> tuple[tuple[int, bytes], ...]:
    fields: list[tuple[int, bytes]] = []
    offset = 0
    while offset < len(payload):
        if len(payload) - offset < FIELD_HEADER.size:
            raise ProtocolError(f"truncated field header at payload offset {offset}")
        tag, length = FIELD_HEADER.unpack_from(payload, offset)
        offset += FIELD_HEADER.size
        if len(payload) - offset < length:
            raise ProtocolError(
                f"field {tag:#04x} claims {length} bytes, only {len(payload) - offset} remain"
            )
        fields.append((tag, payload[offset : offset + length]))
        offset += length
    return tuple(fields)


def kind_name(kind: int) -> str:
    """A frame kind for messages: its name, or its number when unknown."""
    return _KIND_NAMES.get(kind, f"{kind:#04x}")


def encode_request(request: Request, fd_attached: bool = False) -> bytes:
    """A request frame; ``fd_attached`` when the caller sends its mount-namespace descriptor."""
    if isinstance(request, MountRequest):
        fields = [(Tag.MOUNTPOINT, _path_bytes(request.mountpoint))]
        fields += [(Tag.OPTION, _text_bytes(option)) for option in request.options]
        return encode_frame(Kind.MOUNT, fields, fd_attached)
    if isinstance(request, UnmountRequest):
        fields = [(Tag.MOUNTPOINT, _path_bytes(request.mountpoint))]
        if request.lazy:
            fields.append((Tag.LAZY, b""))
        return encode_frame(Kind.UNMOUNT, fields, fd_attached)
    if isinstance(request, Received):
        return encode_frame(Kind.RECEIVED, [], fd_attached)
    return encode_frame(Kind.PING, [], fd_attached)


def encode_reply(reply: Reply) -> bytes:
    """A reply frame; a :class:`Mounted` reply is flagged as carrying the FUSE descriptor."""
    if isinstance(reply, Mounted):
        return encode_frame(Kind.MOUNTED, [], fd_attached=True)
    if isinstance(reply, Done):
        return encode_frame(Kind.DONE, [])
    message = reply.message.encode("utf-8", "replace")[:MAX_MESSAGE_BYTES]
    return encode_frame(
        Kind.FAILED, [(Tag.ERRNO, struct.pack(">I", reply.errno)), (Tag.MESSAGE, message)]
    )


def decode_request(frame: Frame) -> Request:
    """The request a frame holds; every field is checked for presence, count, size and content."""
    fields = _FieldReader(frame)
    if frame.kind == Kind.MOUNT:
        mountpoint = fields.path(Tag.MOUNTPOINT)
        options = fields.texts(Tag.OPTION)
        if sum(len(option) + 1 for option in options) > MAX_OPTIONS_BYTES:
            raise ProtocolError(f"mount options exceed {MAX_OPTIONS_BYTES} bytes")
        fields.finish()
        return MountRequest(mountpoint, tuple(options))
    if frame.kind == Kind.UNMOUNT:
        mountpoint = fields.path(Tag.MOUNTPOINT)
        lazy = fields.flag(Tag.LAZY)
        fields.finish()
        return UnmountRequest(mountpoint, lazy)
    if frame.kind == Kind.PING:
        fields.finish()
        return PingRequest()
    if frame.kind == Kind.RECEIVED:
        fields.finish()
        return Received()
    raise ProtocolError(f"a {kind_name(frame.kind)} frame is not a request")


def decode_reply(frame: Frame) -> Reply:
    """The reply a frame holds; a mounted reply must carry a descriptor, other replies none."""
    fields = _FieldReader(frame)
    if frame.kind == Kind.MOUNTED:
        if not frame.fd_attached:
            raise ProtocolError("a mounted reply must carry the FUSE descriptor")
        fields.finish()
        return Mounted()
    if frame.fd_attached:
        raise ProtocolError(f"a {kind_name(frame.kind)} reply must not carry a descriptor")
    if frame.kind == Kind.DONE:
        fields.finish()
        return Done()
    if frame.kind == Kind.FAILED:
        raw_errno = fields.one(Tag.ERRNO)
        if len(raw_errno) != 4:
            raise ProtocolError("the errno field must be 4 bytes")
        message = fields.one(Tag.MESSAGE).decode("utf-8", "replace")
        fields.finish()
        return Failed(struct.unpack(">I", raw_errno)[0], message)
    raise ProtocolError(f"a {kind_name(frame.kind)} frame is not a reply")


class _FieldReader:
    """Takes the fields of one frame by tag; :meth:`finish` refuses any field left unread."""

    def __init__(self, frame: Frame) -> None:
        self._kind = kind_name(frame.kind)
        self._fields = list(frame.fields)

    def _take(self, tag: int) -> list[bytes]:
        taken = [value for field_tag, value in self._fields if field_tag == tag]
        self._fields = [field for field in self._fields if field[0] != tag]
        return taken

    def one(self, tag: int) -> bytes:
        values = self._take(tag)
        if len(values) != 1:
            raise ProtocolError(
                f"a {self._kind} frame needs exactly one field {tag:#04x}, got {len(values)}"
            )
        return values[0]

    def path(self, tag: int) -> str:
        value = self.one(tag)
        if not value:
            raise ProtocolError("the mountpoint is empty")
        if len(value) > MAX_PATH_BYTES:
            raise ProtocolError(f"the mountpoint exceeds {MAX_PATH_BYTES} bytes")
        if b"\0" in value:
            raise ProtocolError("the mountpoint contains a NUL byte")
        return value.decode("utf-8", "surrogateescape")

    def texts(self, tag: int) -> list[str]:
        values = self._take(tag)
        for value in values:
            if b"\0" in value:
                raise ProtocolError("a mount option contains a NUL byte")
        return [value.decode("utf-8", "surrogateescape") for value in values]

    def flag(self, tag: int) -> bool:
        values = self._take(tag)
        if len(values) > 1 or any(values):
            raise ProtocolError(f"flag field {tag:#04x} must appear at most once and be empty")
        return bool(values)

    def finish(self) -> None:
        if self._fields:
            tags = sorted({f"{tag:#04x}" for tag, _ in self._fields})
            raise ProtocolError(f"unexpected fields in a {self._kind} frame: {', '.join(tags)}")


def _path_bytes(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _text_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")

"""The wire protocol, without sockets: round trips, any chunking, and every kind of bad frame."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.fuse_proxy.protocol import (
    HEADER,
    MAX_PAYLOAD,
    Done,
    Failed,
    FrameDecoder,
    Kind,
    Mounted,
    MountRequest,
    PingRequest,
    ProtocolError,
    Received,
    Tag,
    UnmountRequest,
    decode_reply,
    decode_request,
    encode_frame,
    encode_reply,
    encode_request,
)

paths = st.text(
    alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=200,
).map(lambda text: "/" + text)
raw_paths = st.binary(min_size=1, max_size=200).filter(lambda raw: b"\0" not in raw)
options = st.lists(
    st.text(
        alphabet=st.characters(blacklist_characters="\0,", blacklist_categories=("Cs",)),
        max_size=30,
    ),
    max_size=10,
)
requests = st.one_of(
    st.builds(MountRequest, paths, options.map(tuple)),
    st.builds(UnmountRequest, paths, st.booleans()),
    st.just(PingRequest()),
    st.just(Received()),
)
replies = st.one_of(
    st.just(Mounted()),
    st.just(Done()),
    st.builds(Failed, st.integers(0, 2**32 - 1), st.text(max_size=300)),
)


def decode_one(data: bytes) -> object:
    frames = FrameDecoder().feed(data)
    assert len(frames) == 1
    return frames[0]


@given(requests, st.booleans())
def test_requests_round_trip(request: object, with_fd: bool) -> None:
    frame = decode_one(encode_request(request, fd_attached=with_fd))  # type: ignore[arg-type]
    assert frame.fd_attached is with_fd  # type: ignore[attr-defined]
    assert decode_request(frame) == request  # type: ignore[arg-type]


@given(raw_paths)
def test_any_path_bytes_survive_a_round_trip(raw: bytes) -> None:
    path = "/" + raw.decode("utf-8", "surrogateescape")
    frame = decode_one(encode_request(MountRequest(path)))
    decoded = decode_request(frame)  # type: ignore[arg-type]
    assert isinstance(decoded, MountRequest)
    assert decoded.mountpoint.encode("utf-8", "surrogateescape") == path.encode(
        "utf-8", "surrogateescape"
    )


@given(replies)
def test_replies_round_trip(reply: object) -> None:
    frame = decode_one(encode_reply(reply))  # type: ignore[arg-type]
    assert decode_reply(frame) == reply  # type: ignore[arg-type]


@given(st.lists(requests, min_size=1, max_size=4), st.data())
def test_frames_decode_the_same_however_the_stream_is_cut(
    batch: list[object], data: st.DataObject
) -> None:
    stream = b"".join(encode_request(request) for request in batch)  # type: ignore[arg-type]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    frames = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        frames += decoder.feed(stream[start:end])
    assert [decode_request(frame) for frame in frames] == batch
    assert decoder.buffered == 0


@given(st.binary(max_size=64))
def test_garbage_is_a_protocol_error_or_incomplete_never_a_crash(garbage: bytes) -> None:
    decoder = FrameDecoder()
    try:
        for frame in decoder.feed(garbage):
            decode_request(frame)
    except ProtocolError:
        pass


def header(
    kind: int = Kind.PING, flags: int = 0, reserved: int = 0, length: int = 0, version: int = 1
) -> bytes:
    return HEADER.pack(b"PWFP", version, kind, flags, reserved, length)


def field(tag: int, value: bytes) -> bytes:
    return struct.pack(">BH", tag, len(value)) + value


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"HTTP", "bad magic b'HTTP'"),
        (header(version=2), "protocol version 2 is not supported"),
        (header(kind=0x7F), "unknown frame kind 0x7f"),
        (header(flags=0x02), "unknown flags 0x02"),
        (header(reserved=1), "reserved header byte is 1"),
        (header(length=MAX_PAYLOAD + 1), f"payload length {MAX_PAYLOAD + 1} exceeds"),
        (header(length=2) + b"\x01\x00", "truncated field header"),
        (header(length=5) + b"\x01\x00\x09ab", "claims 9 bytes, only 2 remain"),
    ],
)
def test_bad_frames_are_refused_at_once(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message.replace("(", r"\(")):
        FrameDecoder().feed(data)


def test_an_oversized_frame_is_refused_from_its_header_alone() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="exceeds"):
        decoder.feed(header(kind=Kind.MOUNT, length=2**32 - 1))
    with pytest.raises(ProtocolError, match="already failed"):
        decoder.feed(b"more")


def frame_of(kind: int, *fields: bytes, flags: int = 0) -> object:
    payload = b"".join(fields)
    return decode_one(header(kind=kind, flags=flags, length=len(payload)) + payload)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (frame_of(Kind.MOUNT), "exactly one field 0x01, got 0"),
        (frame_of(Kind.MOUNT, field(Tag.MOUNTPOINT, b"/a"), field(Tag.MOUNTPOINT, b"/b")), "got 2"),
        (frame_of(Kind.MOUNT, field(Tag.MOUNTPOINT, b"")), "the mountpoint is empty"),
        (frame_of(Kind.MOUNT, field(Tag.MOUNTPOINT, b"/a\0b")), "NUL byte"),
        (frame_of(Kind.MOUNT, field(Tag.MOUNTPOINT, b"/" + b"a" * 4095)), "exceeds 4095 bytes"),
        (
            frame_of(Kind.MOUNT, field(Tag.MOUNTPOINT, b"/a"), field(Tag.OPTION, b"ro\0")),
            "option contains a NUL",
        ),
        (
            frame_of(Kind.MOUNT, field(Tag.MOUNTPOINT, b"/a"), field(Tag.ERRNO, b"1234")),
            "unexpected fields in a mount frame: 0x04",
        ),
        (
            frame_of(
                Kind.MOUNT, field(Tag.MOUNTPOINT, b"/a"), *[field(Tag.OPTION, b"x" * 1000)] * 5
            ),
            "mount options exceed 4096 bytes",
        ),
        (
            frame_of(Kind.UNMOUNT, field(Tag.MOUNTPOINT, b"/a"), field(Tag.LAZY, b"x")),
            "must appear at most once and be empty",
        ),
        (frame_of(Kind.PING, field(Tag.LAZY, b"")), "unexpected fields in a ping frame"),
        (frame_of(Kind.RECEIVED, field(Tag.LAZY, b"")), "unexpected fields in a received frame"),
        (frame_of(Kind.DONE), "a done frame is not a request"),
    ],
)
def test_malformed_requests_name_the_problem(frame: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_request(frame)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (frame_of(Kind.MOUNTED), "must carry the FUSE descriptor"),
        (frame_of(Kind.DONE, flags=1), "a done reply must not carry a descriptor"),
        (
            frame_of(Kind.FAILED, field(Tag.ERRNO, b"12"), field(Tag.MESSAGE, b"x")),
            "errno field must be 4 bytes",
        ),
        (frame_of(Kind.PING), "a ping frame is not a reply"),
    ],
)
def test_malformed_replies_name_the_problem(frame: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_reply(frame)  # type: ignore[arg-type]


def test_encoding_refuses_what_does_not_fit() -> None:
    with pytest.raises(ProtocolError, match="at most 65535 fit"):
        encode_frame(Kind.PING, [(Tag.OPTION, b"x" * 70000)])
    with pytest.raises(ProtocolError, match="exceeds the 16384-byte limit"):
        encode_frame(Kind.PING, [(Tag.OPTION, b"x" * 9000)] * 2)

"""The FUSE proxy adapter's exception tree; callers catch :class:`FuseProxyError` and below."""

from __future__ import annotations


class FuseProxyError(Exception):
    """Anything the FUSE proxy could not do."""


class TransportError(FuseProxyError):
    """The daemon's socket could not be reached, or a frame could not be sent or received."""


class ProxyRefusedError(FuseProxyError):
    """The daemon answered, and refused or failed the request: its errno and its message."""

    def __init__(self, error_number: int, message: str) -> None:
        super().__init__(message)
        self.errno = error_number
        self.message = message


class ServerSetupError(FuseProxyError):
    """The daemon cannot start: its socket path, /dev/fuse or its privileges are not usable."""

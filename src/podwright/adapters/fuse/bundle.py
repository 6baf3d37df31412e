"""The shim and wrapper as one self-contained zipapp, installed into workload containers.

A workload image has its own Python (or only a system ``python3``) and not podwright, so an
init container copies this bundle into a shared ``emptyDir``: the same zipapp under the names
``fusermount``, ``fusermount3`` and ``fusermount-wrapper``, dispatching on the name it was run
as. It holds only the standard-library modules of the client side (protocol, fusermount's
command line, transport, client, shim, wrapper), with empty package ``__init__`` files so that
nothing else of podwright (or of its dependencies) is imported.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from importlib import util

SHIM_NAMES = ("fusermount", "fusermount3")
WRAPPER_NAME = "fusermount-wrapper"
DEFAULT_INTERPRETER = "/usr/bin/env python3"

_MODULES = (
    "podwright.core.fuse_proxy.protocol",
    "podwright.core.fuse_proxy.fusermount_cli",
    "podwright.adapters.fuse.errors",
    "podwright.adapters.fuse.transport",
    "podwright.adapters.fuse.client",
    "podwright.adapters.fuse.shim",
    "podwright.adapters.fuse.wrapper",
)
_PACKAGES = (
    "podwright",
    "podwright.core",
    "podwright.core.fuse_proxy",
    "podwright.adapters",
    "podwright.adapters.fuse",
)
_MAIN = '''\
"""podwright's fusermount shim and wrapper; the program name chooses which runs."""
import os
import sys

if os.path.basename(sys.argv[0]).startswith("fusermount-wrapper"):
    from podwright.adapters.fuse.wrapper import main
else:
    from podwright.adapters.fuse.shim import main
sys.exit(main(sys.argv))
'''


def build_bundle(interpreter: str = DEFAULT_INTERPRETER) -> bytes:
    """The zipapp's bytes: a ``#!`` line for ``interpreter`` and the client modules."""
    if not interpreter.startswith("/") or "\n" in interpreter:
        raise ValueError(f"interpreter must be an absolute path, got {interpreter!r}")
    if len(interpreter.split()) > 2:
        raise ValueError(
            f"interpreter {interpreter!r} has more than one argument; the kernel passes everything "
            "after the path as one (combine flags, as in '-IS')"
        )
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("__main__.py", _MAIN)
        for package in _PACKAGES:
            path = package.replace(".", "/") + "/__init__.py"
            bundle.writestr(path, f'"""{package}, as bundled for the FUSE proxy shim."""\n')
        for module in _MODULES:
            spec = util.find_spec(module)
            if spec is None or spec.origin is None:
                raise FileNotFoundError(f"cannot find the source of {module}")
            with open(spec.origin, "rb") as source:
                bundle.writestr(module.replace(".", "/") + ".py", source.read())
    return f"#!{interpreter}\n".encode() + archive.getvalue()


def install_bundle(directory: str, interpreter: str = DEFAULT_INTERPRETER) -> list[str]:
    """Write the bundle as ``fusermount``, ``fusermount3`` and ``fusermount-wrapper``; their paths.

    Each file is written under a temporary name and renamed into place, so a reader never sees
    a partial program.
    """
    payload = build_bundle(interpreter)
    os.makedirs(directory, exist_ok=True)
    written = []
    for name in (*SHIM_NAMES, WRAPPER_NAME):
        path = os.path.join(directory, name)
        temporary = f"{path}.tmp-{os.getpid()}"
        with open(temporary, "wb") as file:
            file.write(payload)
        os.chmod(
            temporary, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
        )
        os.replace(temporary, path)
        written.append(path)
    return written

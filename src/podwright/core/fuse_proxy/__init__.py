"""The FUSE proxy's pure parts: wire protocol, fusermount's command line, mount policy, manifests.

The modules the in-container shim needs (``protocol`` and ``fusermount_cli``) use the standard
library only, so that the shim can be bundled as a zipapp for any image with a ``python3``.
"""

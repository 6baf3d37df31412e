"""The FUSE proxy's OS side: the daemon, its client, the fusermount shim and the wrapper.

``transport``, ``client``, ``shim``, ``wrapper`` and ``errors`` use the standard library only and
are bundled into the zipapp installed in workload containers (see ``bundle``); ``syscalls``,
``callers``, ``mounter`` and ``server`` run in the privileged daemon.
"""

"""The local backend: Pods and Jobs run as processes on this machine (see ``cluster``)."""

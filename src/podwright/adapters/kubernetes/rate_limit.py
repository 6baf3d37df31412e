"""A client-side rate limit on the requests a client sends to the API server.

A controller that writes as fast as it can makes the API server (and etcd behind it) pay for its
bursts: a thousand new Workloads at once would be a few thousand writes at once. client-go bounds
every client with a token bucket (``--kube-api-qps``, ``--kube-api-burst`` in Kubernetes'
controllers); :class:`TokenBucket` is that bucket, which :class:`~podwright.adapters.kubernetes.
client.KubernetesClient` waits on before each request when it is given one (the operator's
``--kube-api-qps``/``--kube-api-burst``). The API-server emulator's controllers use it too, to be
limited as kube-controller-manager's are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """client-go's token bucket (``flowcontrol.NewTokenBucketRateLimiter``): ``qps`` tokens a
    second, at most ``burst`` kept, full at the start; :meth:`take` waits for a token. A token is
    reserved under the lock and waited for outside it, as ``rate.Limiter.Wait`` does, so waiters
    are served in order. Bad settings are a ValueError naming them."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be more than 0, not {qps}")
        if burst < 1:
            raise ValueError(f"burst must be 1 or more, not {burst}")
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Take a token, waiting until there is one; the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
            self._tokens -= 1.0
            wait = -self._tokens / self._qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait

"""The process's one strata.Runtime for strata.torch (storage and monitor
share it: one store connection, one telemetry socket)."""
import threading

import strata

_runtime = None
_lock = threading.Lock()


def runtime():
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = strata.Runtime()
        return _runtime

"""Python stacks for the worker's hang diagnosis without py-spy
(worker/stack_dump.h, "faulthandler"): a rank started by a strata worker
(STRATA_PLAN set) registers faulthandler on signal SIGRTMIN+5 to write every
thread's Python stack to `pystack-<pid>` in the directory of its plan file
(the attempt's private directory). The file's existence tells the worker the
handler is there: it then truncates the file, sends the signal and reads
what faulthandler wrote. At exit the file is removed and the signal ignored
before Python drops the handler. Nothing is registered when the signal already has
a handler or the file cannot be made."""
import atexit
import faulthandler
import os
import signal

# The worker's kPyStackSignalOffset (worker/stack_dump.h): the same number.
SIGNAL_OFFSET = 5
_file = None  # kept open: faulthandler writes to its descriptor


def register(environ=os.environ):
    """Registers the handler once; returns the dump file's path or None."""
    global _file
    plan = environ.get("STRATA_PLAN")
    if _file is not None or not plan or not hasattr(signal, "SIGRTMIN"):
        return None
    sig = signal.SIGRTMIN + SIGNAL_OFFSET
    if signal.getsignal(sig) not in (signal.SIG_DFL, None):
        return None
    path = os.path.join(os.path.dirname(plan), f"pystack-{os.getpid()}")
    try:
        # O_APPEND: the worker truncates the file before each dump.
        fd = os.open(path + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                     | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    f = os.fdopen(fd, "a")
    faulthandler.register(sig, file=f, all_threads=True, chain=False)
    try:
        # Named only now: the signal's default action would end the process.
        os.rename(path + ".new", path)
    except OSError:
        faulthandler.unregister(sig)
        f.close()
        return None
    _file = f
    atexit.register(_unregister, sig, path)
    return path


def _unregister(sig, path):
    """At exit, before the interpreter drops faulthandler's handler: the
    file goes first (the worker signals only ranks that have it), then a
    signal already on its way is ignored instead of ending the process
    with the signal's default action."""
    try:
        os.unlink(path)
    except OSError:
        pass
    faulthandler.unregister(sig)
    signal.signal(sig, signal.SIG_IGN)

"""Background staging copies for strata.torch.StorageWriter (docs/pytorch.md,
"Asynchronous").

DCP's async_save contract is that once it returns, training may change the
saved tensors. A copy of 1 GiB takes 0.5-1.3 s on the training thread
(docs/results.md, "PyTorch"), so the writer copies on a thread instead and
guards what would change the tensors before their copy is made:

- every optimizer's step (a global optimizer step pre-hook, installed once)
  waits until every pending copy is made: optimizer steps change
  parameters and optimizer state in place;
- a module's forward (a global forward pre-hook, present only while a copy
  is pending) waits until the module tree's buffers are copied: forward
  changes buffers in place (batch-norm statistics, DDP's buffer broadcast),
  never parameters;
- any other in-place change of a saved tensor before its copy is made
  (e.g. a hand-written EMA update) is caught by the tensor's version
  counter when the copy completes after it: the save then fails naming the
  tensor, nothing is committed. Call wait_for_staging() before such code.

The copy is made by the staging thread, by a hook, or by the save's own
thread (DCP's upload), whichever reaches a tensor first: each tensor is
copied exactly once.
"""
import threading
import time

import torch

__all__ = ["StagingJob", "staging_like", "start", "wait_for_staging"]

# Staging tensors start on a page: the engine's file storage then writes
# them with O_DIRECT straight from their memory, without a copy
# (checkpoint/internal/direct_writer.h). torch's CPU allocator aligns to 64
# bytes only.
_PAGE = 4096

_PENDING, _COPYING, _DONE = 0, 1, 2


def staging_like(v):
    """An uninitialised CPU tensor like `v` for staging it: contiguous and
    page-aligned for a plain tensor; empty_like (same placements) for a
    DTensor or another tensor subclass."""
    if type(v) is not torch.Tensor:
        return (torch.empty_like(v, device="cpu")
                if v.device.type != "cpu" else torch.empty_like(v))
    nbytes = v.numel() * v.element_size()
    raw = torch.empty(nbytes + _PAGE, dtype=torch.uint8)
    start = (-raw.data_ptr()) % _PAGE
    return raw[start:start + nbytes].view(v.dtype).view(v.shape)


def _local(t):
    """The plain tensor holding `t`'s data (a DTensor's local shard)."""
    return getattr(t, "_local_tensor", t)


def _storage_key(t):
    return _local(t).untyped_storage().data_ptr()


class StagingJob:
    """Copies srcs[i] into dsts[i] (CPU tensors) on a thread; other threads
    may copy a pending tensor themselves (ensure) or wait for all (wait)."""

    def __init__(self, names, srcs, dsts):
        self.names, self.srcs, self.dsts = names, srcs, dsts
        self._versions = [_local(s)._version for s in srcs]
        self._state = [_PENDING] * len(srcs)
        self._left = len(srcs)
        self._cv = threading.Condition()
        self.error = None  # the first failure (an exception)
        self._by_storage = {}
        for i, s in enumerate(srcs):
            self._by_storage.setdefault(_storage_key(s), []).append(i)

    def start(self):
        threading.Thread(target=self.wait, name="strata-dcp-stage",
                         daemon=True).start()

    def done(self):
        return self._left == 0

    def indexes_of(self, tensors):
        """The indexes of the sources sharing storage with `tensors`."""
        out = []
        for t in tensors:
            out.extend(self._by_storage.get(_storage_key(t), ()))
        return out

    def _copy(self, i):
        with self._cv:
            if self._state[i] == _COPYING:
                self._cv.wait_for(lambda: self._state[i] == _DONE)
            if self._state[i] == _DONE:
                return
            self._state[i] = _COPYING
        err = None
        try:
            self.dsts[i].copy_(self.srcs[i])  # releases the GIL
            if _local(self.srcs[i])._version != self._versions[i]:
                err = RuntimeError(
                    f"tensor {self.names[i]!r} was changed in place while "
                    f"async_save was staging it (not by an optimizer step or "
                    f"a forward): the save is abandoned; call "
                    f"strata.torch.wait_for_staging() before such changes")
        except BaseException as e:  # handed to the save
            err = e
        with self._cv:
            self._state[i] = _DONE
            self._left -= 1
            if err is not None and self.error is None:
                self.error = err
            self._cv.notify_all()

    def ensure(self, indexes):
        """Copies (or waits for) the tensors at `indexes`."""
        for i in indexes:
            self._copy(i)

    def wait(self):
        """Copies what is left, sharing the work with other callers, and
        waits until every tensor is copied."""
        self.ensure(range(len(self.srcs)))


_lock = threading.Lock()
_pending = []          # StagingJobs with copies left
_handled = set()       # ids of modules whose buffers are staged
_forward_hook = None   # the global forward pre-hook's handle while pending
_optimizer_hook = None  # installed once


def _note(seconds):
    from strata.torch.monitor import current
    current().note("checkpoint", seconds)


def _live_jobs():
    with _lock:
        _pending[:] = [j for j in _pending if not j.done()]
        return list(_pending)


def _drop_forward_hook():
    global _forward_hook
    with _lock:
        if _pending or _forward_hook is None:
            return
        handle, _forward_hook = _forward_hook, None
    # Safe inside a forward pre-hook: torch iterates a copy of the hooks.
    handle.remove()


def wait_for_staging():
    """Blocks until every background staging copy of strata.torch's DCP
    saves is made (what an optimizer step waits for): call it before
    changing saved tensors in place by other means."""
    start = time.perf_counter()
    jobs = _live_jobs()
    for job in jobs:
        job.wait()
    _live_jobs()
    _drop_forward_hook()
    if jobs:
        _note(time.perf_counter() - start)


def _before_optimizer_step(optimizer, args, kwargs):
    if _pending:
        wait_for_staging()


def _before_forward(module, args):
    if id(module) in _handled:
        return None
    jobs = _live_jobs()
    if not jobs:
        _drop_forward_hook()
        return None
    start = time.perf_counter()
    buffers = list(module.buffers())
    for job in jobs:
        job.ensure(job.indexes_of(buffers))
    with _lock:
        _handled.update(id(m) for m in module.modules())
    _note(time.perf_counter() - start)
    return None


def start(job):
    """Starts `job` on a thread, with the hooks that guard its sources.
    From the training thread (the one running the optimizer)."""
    global _forward_hook, _optimizer_hook
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    with _lock:
        _pending.append(job)
        _handled.clear()
        if _optimizer_hook is None:
            _optimizer_hook = register_optimizer_step_pre_hook(
                _before_optimizer_step)
        if _forward_hook is None:
            _forward_hook = register_module_forward_pre_hook(_before_forward)
    job.start()

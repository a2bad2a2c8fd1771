"""A step monitor for torch training loops: one report per step to the
rank's strata worker, with sections, so the coordinator's straggler
detector, `strata diagnose`, the heat map, the trace and goodput see where
a torch step went (docs/pytorch.md).

    mon = strata.torch.monitor(model, optimizer)   # hooks, once
    for step in range(start, steps):
        with strata.torch.step(step, tokens=n) as s:
            loss = model(x).loss; loss.backward(); optimizer.step()
            s.loss = loss.item()

Sections (seconds, per step):
  forward    the model's forward calls (module forward hooks)
  backward   from the end of the last forward to the optimizer step, less
             the all-reduce wait
  optimizer  optimizer.step() (optimizer step hooks)
  wait       the gradient all-reduce's wait: DDP only, through a
             communication hook that timestamps each bucket's all-reduce;
             the wait is the last bucket's completion minus its launch (the
             last bucket is launched when backward's compute ends, so what
             follows is time spent waiting for the slowest rank). The
             coordinator counts "wait" as not the rank's own work.
  checkpoint the training thread's part of strata.torch.StorageWriter's
             saves (a dcp.save, or async_save's staging), counted into the
             step that contains it (or the next one): goodput's checkpoint
             share.
Without monitor(), step() reports the step time and `checkpoint` alone. Reports are sent
without blocking (runtime/step_timer.h): a worker that is gone or slow
costs the loop nothing but the report.
"""
import contextlib
import math
import threading
import time

import strata
from strata.torch import _runtime

__all__ = ["StepMonitor", "monitor", "step", "current", "set_total_steps"]

_current = None
_current_lock = threading.Lock()


class _StepInfo:
    """What the loop may set inside `with step(n) as s:`."""

    def __init__(self, tokens, loss):
        self.tokens = tokens
        self.loss = loss


class StepMonitor:
    """Hooks on one model and optimizer; reports through `runtime` (default:
    a strata.Runtime of this rank). One training thread; the DDP hook's
    completions arrive on communication threads."""

    def __init__(self, model=None, optimizer=None, runtime=None):
        self._rt = runtime if runtime is not None else _runtime.runtime()
        self._handles = []
        self._lock = threading.Lock()
        self._thread = None  # the training thread: the one running step()
        self._extra = {}     # note()d seconds by section, for the next report
        self._reset()
        if model is not None:
            self._hook_model(model)
        if optimizer is not None:
            self._handles.append(optimizer.register_step_pre_hook(
                lambda *a, **k: self._mark("opt_start")))
            self._handles.append(optimizer.register_step_post_hook(
                lambda *a, **k: self._mark("opt_end")))

    # -- hooks ----------------------------------------------------------
    def _reset(self):
        self._forward = 0.0
        self._fwd_start = None
        self._fwd_end = None
        self._opt_start = None
        self._opt_end = None
        with self._lock:
            self._reduces = []  # (launch, done) per bucket

    def _mark(self, what):
        setattr(self, "_" + what, time.perf_counter())

    def _pre_forward(self, *args, **kwargs):
        self._fwd_start = time.perf_counter()

    def _post_forward(self, *args, **kwargs):
        now = time.perf_counter()
        if self._fwd_start is not None:
            self._forward += now - self._fwd_start
            self._fwd_start = None
        self._fwd_end = now

    def _hook_model(self, model):
        self._handles.append(model.register_forward_pre_hook(self._pre_forward))
        self._handles.append(model.register_forward_hook(self._post_forward))
        from torch.nn.parallel import DistributedDataParallel
        if isinstance(model, DistributedDataParallel):
            model.register_comm_hook(model.process_group, self._ddp_hook)

    def _ddp_hook(self, process_group, bucket):
        # DDP's default all-reduce (divide by the world size, then sum; as
        # torch's default_hooks.allreduce_hook), timed. One Python callback
        # per bucket (allreduce_hook chains its own, then ours ran after it).
        import torch.distributed as dist
        group = process_group if process_group is not None else dist.group.WORLD
        tensor = bucket.buffer()
        tensor.div_(group.size())
        launch = time.perf_counter()
        fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
        reduces = self._reduces

        def done(f):
            reduces.append((launch, time.perf_counter()))  # atomic (GIL)
            return tensor
        return fut.then(done)

    # -- steps ------------------------------------------------------------
    def note(self, name, seconds):
        """Adds `seconds` of the training thread's time to section `name` of
        the current (or next) step's report; from any other thread than the
        one running step() (before the first step: the main thread), e.g.
        async_save's background save, it is not the loop's time and is
        dropped."""
        thread = self._thread
        if thread is None:  # before the first step: the main thread's only
            thread = threading.main_thread().ident
        if threading.get_ident() != thread:
            return
        with self._lock:
            self._extra[name] = self._extra.get(name, 0.0) + seconds

    def sections(self, step_end):
        """The sections of the step ending at `step_end` (perf_counter)."""
        out = {}
        with self._lock:
            reduces = list(self._reduces)
            extra, self._extra = self._extra, {}
        wait = 0.0
        if reduces:
            last_launch = max(r[0] for r in reduces)
            last_done = max(r[1] for r in reduces)
            wait = max(0.0, last_done - last_launch)
            out["wait"] = wait
        if self._fwd_end is not None:
            out["forward"] = self._forward
            back_end = self._opt_start if self._opt_start is not None else step_end
            out["backward"] = max(0.0, back_end - self._fwd_end - wait)
        if self._opt_start is not None and self._opt_end is not None:
            out["optimizer"] = max(0.0, self._opt_end - self._opt_start)
        for name, seconds in extra.items():
            out[name] = out.get(name, 0.0) + seconds
        return out

    @contextlib.contextmanager
    def step(self, n, tokens=0, loss=None):
        """Times step `n` (an int >= 0) and reports it on exit, also when the
        body raises (then without a loss). `tokens` and `loss` may also be
        set on the yielded object."""
        n = strata._int64("step", n)
        self._thread = threading.get_ident()
        info = _StepInfo(tokens, loss)
        ok = False
        try:
            yield info
            ok = True
        finally:
            sections = self.sections(time.perf_counter())
            self._reset()
            loss_value = info.loss if ok and info.loss is not None else math.nan
            if hasattr(loss_value, "item"):
                loss_value = loss_value.item()
            self._rt.end_step(n, tokens=info.tokens or 0, loss=loss_value,
                              sections=sections)

    def close(self):
        for h in self._handles:
            h.remove()
        self._handles = []


def monitor(model=None, optimizer=None, runtime=None):
    """Registers hooks on `model` (forward; DDP all-reduce wait) and
    `optimizer` (step) and makes the monitor the one step() uses."""
    global _current
    with _current_lock:
        if _current is not None:
            _current.close()
        _current = StepMonitor(model, optimizer, runtime)
        return _current


def current():
    """The monitor step() uses (created without hooks on first use)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = StepMonitor()
        return _current


def set_total_steps(total):
    """Declares the run's last step (strata.Runtime.set_total_steps): a rank
    past it is done, not hung, while it finishes its last save and exits."""
    _runtime.runtime().set_total_steps(total)


def step(n, tokens=0, loss=None):
    """`with strata.torch.step(n):` around one training step."""
    return current().step(n, tokens=tokens, loss=loss)

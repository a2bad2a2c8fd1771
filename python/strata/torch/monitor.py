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
  wait       the gradient all-reduce's wait (DDP only): from the moment the
             last gradient is accumulated (a post-accumulate-grad hook on
             the parameters that become ready last; DDP launches its last
             bucket's all-reduce then, so backward's compute is over) to the
             optimizer step (the end of backward, which returns once DDP has
             all reduced buckets): time spent waiting for the slowest rank.
             No communication hook: DDP keeps its own C++ all-reduce, and
             no Python runs on gloo's threads. The coordinator counts
             "wait" as not the rank's own work.
  checkpoint the training thread's part of strata.torch.StorageWriter's
             saves (a dcp.save, or async_save's staging), counted into the
             step that contains it (or the next one): goodput's checkpoint
             share.
Without monitor(), step() reports the step time and `checkpoint` alone.
Reporting only appends to memory; a thread of libstrata sends the reports
in batches (runtime/step_timer.h): a worker that is gone or slow costs the
loop nothing, and no system call sits on the step path.
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
    a strata.Runtime of this rank). One training thread (on CPU, autograd
    runs the gradient hooks on it too; on GPU on the device's thread:
    each hook only stores a time)."""

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
    # Parameters whose gradients are watched for the end of backward's
    # compute after the first step: those that became ready last (a few
    # suffice; each is one Python call per step).
    _WATCHED = 2

    def _reset(self):
        self._forward = 0.0
        self._fwd_start = None
        self._fwd_end = None
        self._opt_start = None
        self._opt_end = None
        self._grad_end = None

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
            # Every parameter at first; after the first step only the
            # _WATCHED that were ready last (_narrow_grad_hooks).
            self._grad_order = []
            self._grad_hooks = []
            for p in model.parameters():
                if p.requires_grad:
                    self._grad_hooks.append(p.register_post_accumulate_grad_hook(
                        self._first_grad_ready))

    def _first_grad_ready(self, param):
        self._grad_end = time.perf_counter()
        if len(self._grad_order) < 65536:  # bounded without a step()
            self._grad_order.append(param)

    def _grad_ready(self, param):
        self._grad_end = time.perf_counter()

    def _narrow_grad_hooks(self):
        # After the first step that had gradients: hooks only on the
        # parameters ready last (a static graph readies them in the same
        # order every step; one that stops being ready last only makes
        # the wait look shorter).
        for h in self._grad_hooks:
            h.remove()
        last = {}
        for p in reversed(self._grad_order):
            if len(last) == self._WATCHED:
                break
            last.setdefault(id(p), p)
        self._grad_order = None
        self._grad_hooks = [p.register_post_accumulate_grad_hook(self._grad_ready)
                            for p in last.values()]

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
            extra, self._extra = self._extra, {}
        wait = 0.0
        back_end = self._opt_start if self._opt_start is not None else step_end
        if self._grad_end is not None:
            if self._grad_order:  # the first step with gradients
                self._narrow_grad_hooks()
            wait = max(0.0, back_end - self._grad_end)
            out["wait"] = wait
        if self._fwd_end is not None:
            out["forward"] = self._forward
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
        for h in self._handles + getattr(self, "_grad_hooks", []):
            h.remove()
        self._handles = []
        self._grad_hooks = []


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

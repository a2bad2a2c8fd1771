"""strata for Python ranks: placement, sharded checkpoints and step telemetry.

A ctypes wrapper over libstrata's C API (runtime/include/strata/c_api.h), so
any Python rank started by `strata run`, `strata submit`, `mpirun
strata-exec` or srun can read its placement, save and load checkpoints in
global coordinates (reshardable), and report steps to its worker.

The library is found by strata._library (the STRATA_LIB override, the wheel's
own copy, the install this package belongs to, the loader's path).
"""

import contextlib
import ctypes
import math
import os

from strata import _pystack
from strata._library import load_library
from strata._version import __version__

__all__ = ["Runtime", "Checkpointer", "Shard", "StrataError", "RankLost",
           "latest_step", "load", "load_blob"]


class StrataError(RuntimeError):
    """A failed strata call: `code` is the absl::StatusCode value."""

    def __init__(self, code, message):
        super().__init__(f"strata error {code}: {message}")
        self.code = code


class RankLost(StrataError):
    """A collective ended because a peer rank died or hung (absl codes 10
    aborted, 14 unavailable, 4 deadline exceeded). With in-place restart
    enabled (Runtime.enable_in_place) the training loop catches it and
    calls Runtime.rejoin instead of exiting."""


_lib = load_library()
# The same library through ctypes.PyDLL: calls that keep the GIL. Only for
# calls that never block (the step path: strata_timer_add and end_step only
# append to memory, runtime/step_timer.h): a CDLL call drops the GIL, and on
# a busy machine another thread waiting for it (gloo's completion
# callbacks, DCP's upload thread) may keep the training thread from getting
# it back for up to the interpreter's switch interval (5 ms).
_fast = ctypes.PyDLL(_lib._name, handle=_lib._handle)
# Under a strata worker: Python stacks for hang diagnoses without py-spy.
_pystack.register()


class _Placement(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in (
        "rank", "world_size", "local_rank", "local_world_size", "tp", "pp",
        "dp", "cp", "tp_rank", "pp_rank", "dp_rank", "cp_rank",
        "restart_count")]


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int),
                ("global_shape", ctypes.POINTER(ctypes.c_int64)),
                ("local_shape", ctypes.POINTER(ctypes.c_int64)),
                ("global_offset", ctypes.POINTER(ctypes.c_int64)),
                ("replica_id", ctypes.c_int), ("num_replicas", ctypes.c_int),
                ("data", ctypes.c_void_p)]


class _Blob(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("per_rank", ctypes.c_int),
                ("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


_lib.strata_last_error.restype = ctypes.c_char_p
_lib.strata_job_id.restype = ctypes.c_char_p
_lib.strata_ckpt_uri.restype = ctypes.c_char_p
_lib.strata_init.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
_lib.strata_finalize.argtypes = [ctypes.c_void_p]
_lib.strata_get_placement.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Placement)]
_lib.strata_job_id.argtypes = [ctypes.c_void_p]
_lib.strata_ckpt_uri.argtypes = [ctypes.c_void_p]
_lib.strata_timer_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double]
_fast.strata_timer_add.argtypes = _lib.strata_timer_add.argtypes
_lib.strata_timer_set_total_steps.argtypes = [ctypes.c_void_p, ctypes.c_int64]
_lib.strata_timer_end_step.argtypes = [ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_int64, ctypes.c_double]
_fast.strata_timer_end_step.argtypes = _lib.strata_timer_end_step.argtypes
_lib.strata_phase_begin.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                    ctypes.c_double]
_lib.strata_phase_end.argtypes = [ctypes.c_void_p]
_lib.strata_inplace_enable.argtypes = [ctypes.c_void_p]
_lib.strata_inplace_generation.argtypes = [ctypes.c_void_p,
                                           ctypes.POINTER(ctypes.c_int)]
_lib.strata_inplace_rejoin.argtypes = [ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_int64, ctypes.c_int64,
                                       ctypes.POINTER(ctypes.c_int64)]
_lib.strata_ckpt_open.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_void_p)]
_lib.strata_ckpt_save.argtypes = [ctypes.c_void_p, ctypes.c_int64,
                                  ctypes.POINTER(_Tensor), ctypes.c_int,
                                  ctypes.POINTER(_Blob), ctypes.c_int]
_lib.strata_ckpt_save_borrowed.argtypes = _lib.strata_ckpt_save.argtypes
_lib.strata_ckpt_wait.argtypes = [ctypes.c_void_p]
_lib.strata_ckpt_close.argtypes = [ctypes.c_void_p]
_lib.strata_ckpt_latest.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64)]
_lib.strata_ckpt_load.argtypes = [ctypes.c_char_p, ctypes.c_int64,
                                  ctypes.POINTER(_Tensor), ctypes.c_int]
_lib.strata_ckpt_load_blob.argtypes = [ctypes.c_char_p, ctypes.c_int64,
                                       ctypes.c_char_p, ctypes.c_void_p,
                                       ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_size_t)]


_RANK_LOST_CODES = (4, 10, 14)


def _check(code):
    if code != 0:
        cls = RankLost if code in _RANK_LOST_CODES else StrataError
        raise cls(code, _lib.strata_last_error().decode())


_INT64_MAX = 2**63 - 1


def _int64(what, value):
    """`value` as a non-negative int that fits int64_t; ctypes would wrap
    a larger one silently (2**64 + 12 -> 12)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    value = value.__index__()
    if not 0 <= value <= _INT64_MAX:
        raise ValueError(f"{what} {value} is out of range [0, 2**63-1]")
    return value


def _name(what, name):
    """`name` encoded for C: a non-empty str without NUL (C would cut it
    there)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} name must be a non-empty str, got {name!r}")
    if "\0" in name:
        raise ValueError(f"{what} name {name!r} contains a NUL character")
    return name.encode()


# dtype codes of c_api.h by numpy / torch dtype name.
_DTYPES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3,
           "int32": 4, "int64": 5, "uint8": 6}


def _buffer(array):
    """(data pointer, dtype code, shape) of a contiguous numpy array or CPU
    torch tensor, without copying."""
    if hasattr(array, "data_ptr"):  # torch.Tensor
        if array.device.type != "cpu" or not array.is_contiguous():
            raise ValueError("torch tensors must be contiguous and on the CPU")
        name = str(array.dtype).replace("torch.", "")
        return array.data_ptr(), name, tuple(array.shape)
    if not array.flags["C_CONTIGUOUS"]:
        raise ValueError("numpy arrays must be C-contiguous")
    return array.ctypes.data, str(array.dtype), tuple(array.shape)


class Shard:
    """A box of a global tensor held by this rank: `array` is the local
    part, placed at `offset` in a tensor of `global_shape`. Replicas of the
    same box carry replica ids 0..num_replicas-1 (each writes a share)."""

    def __init__(self, array, global_shape=None, offset=None, replica_id=0,
                 num_replicas=1):
        if (isinstance(num_replicas, bool) or not isinstance(num_replicas, int)
                or num_replicas < 1):
            raise ValueError(f"num_replicas must be an int >= 1, got "
                             f"{num_replicas!r}")
        if (isinstance(replica_id, bool) or not isinstance(replica_id, int)
                or not 0 <= replica_id < num_replicas):
            raise ValueError(f"replica_id must be an int in [0, "
                             f"{num_replicas}), got {replica_id!r}")
        self.array = array
        _, _, shape = _buffer(array)
        self.global_shape = tuple(global_shape) if global_shape else shape
        self.offset = tuple(offset) if offset else (0,) * len(shape)
        self.replica_id = replica_id
        self.num_replicas = num_replicas


def _tensors(items, default_replica=(0, 1)):
    """The C array of `items` (name -> array or Shard, or a list of (name,
    array or Shard) pairs when a rank holds several boxes of one tensor)."""
    keep, out = [], []
    pairs = items.items() if hasattr(items, "items") else items
    for name, value in pairs:
        shard = value if isinstance(value, Shard) else Shard(
            value, replica_id=default_replica[0],
            num_replicas=default_replica[1])
        ptr, dtype, shape = _buffer(shard.array)
        if dtype not in _DTYPES:
            raise ValueError(f"{name}: unsupported dtype {dtype}")
        nd = len(shape)
        arrays = [(ctypes.c_int64 * max(nd, 1))(*v) for v in
                  (shard.global_shape, shape, shard.offset)]
        keep.append(arrays)
        encoded = _name("tensor", name)
        keep.append(encoded)
        out.append(_Tensor(encoded, _DTYPES[dtype], nd, arrays[0], arrays[1],
                           arrays[2], shard.replica_id, shard.num_replicas,
                           ptr))
    return (_Tensor * len(out))(*out), keep


class Checkpointer:
    """Asynchronous checkpoints whose commit spans every rank of the job."""

    def __init__(self, runtime, uri=None, keep_last=3):
        self._rt = runtime
        self._h = ctypes.c_void_p()
        if keep_last is None or isinstance(keep_last, bool) or not isinstance(
                keep_last, int) or not 0 <= keep_last < 2**31:
            raise ValueError(f"keep_last must be an int >= 0 (0: keep "
                             f"every step), got {keep_last!r}")
        curi = _name("checkpoint URI", uri) if uri else b""
        _check(_lib.strata_ckpt_open(runtime._h, curi,
                                     keep_last, ctypes.byref(self._h)))

    def save(self, step, tensors, blobs=None, replicated=True,
             global_blobs=None, borrow=False):
        """Copies `tensors` (name -> array, or Shard) and `blobs` (name ->
        bytes, per rank) and returns; persisting goes on in the background.
        Plain arrays are taken as replicated on every rank: each rank then
        writes 1/world of them (fully-parallel save). `step` is an int in
        [0, 2**63-1] newer than every committed or saved step of this
        checkpoint (StrataError code 6 otherwise: a committed step is never
        replaced). With `borrow` the tensors are not copied: they are
        written from their own memory, which must stay unchanged until
        wait() or close() returns."""
        step = _int64("checkpoint step", step)
        if not self._h:
            raise ValueError("save on a closed Checkpointer")
        rt = self._rt
        replica = (rt.rank, rt.world_size) if replicated else (0, 1)
        # global_blobs (name -> bytes) are stored once, as rank 0 gives them.
        arr, keep = _tensors(tensors, replica)
        blob_list = []
        for per_rank, named in ((1, blobs), (0, global_blobs)):
            for name, data in (named or {}).items():
                buf = ctypes.create_string_buffer(bytes(data), len(data))
                keep.append(buf)
                keep.append(_name("blob", name))
                blob_list.append(_Blob(keep[-1], per_rank,
                                       ctypes.addressof(buf), len(data)))
        barr = (_Blob * len(blob_list))(*blob_list)
        save = _lib.strata_ckpt_save_borrowed if borrow else _lib.strata_ckpt_save
        _check(save(self._h, step, arr, len(tensors), barr, len(blob_list)))

    def wait(self):
        _check(_lib.strata_ckpt_wait(self._h))

    def close(self):
        if self._h:
            h, self._h = self._h, None
            _check(_lib.strata_ckpt_close(h))


class Runtime:
    """This rank's placement (docs/placement.md) and services. With
    build_groups=False (the default for Python, which communicates through
    torch) strata builds no transport of its own."""

    def __init__(self, build_groups=False):
        self._h = ctypes.c_void_p()
        _check(_lib.strata_init(1 if build_groups else 0, ctypes.byref(self._h)))
        p = _Placement()
        _check(_lib.strata_get_placement(self._h, ctypes.byref(p)))
        for name, _ in _Placement._fields_:
            setattr(self, name, getattr(p, name))
        self.job_id = _lib.strata_job_id(self._h).decode()
        self.ckpt_uri = _lib.strata_ckpt_uri(self._h).decode()

    def checkpointer(self, uri=None, keep_last=3):
        return Checkpointer(self, uri, keep_last)

    # Section names already checked and encoded (a loop reports the same
    # few names every step).
    _section_names = {}

    @staticmethod
    def _section(name, seconds):
        encoded = Runtime._section_names.get(name) if type(name) is str else None
        if encoded is None:
            encoded = _name("section", name)
            if len(encoded) > 64:
                raise ValueError(f"section name {name!r} is longer than 64 bytes")
            if len(Runtime._section_names) < 1024:
                Runtime._section_names[name] = encoded
        seconds = float(seconds)
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"section {name!r}: {seconds} seconds (need a "
                             f"finite value >= 0)")
        return encoded, seconds

    def add_section(self, name, seconds):
        """Adds `seconds` (finite, >= 0) to section `name` (1-64 printable
        characters) of the current step; at most 128 sections a step (the
        report must fit the worker's 64 KiB telemetry frame)."""
        _check(_lib.strata_timer_add(self._h, *self._section(name, seconds)))

    def end_step(self, step, tokens=0, loss=math.nan, sections=None):
        """Reports one step (section name -> seconds) to the worker. `loss`
        NaN means none; an infinite one is an error."""
        step = _int64("step", step)
        tokens = _int64("tokens", tokens)
        loss = float(loss)
        if math.isinf(loss):
            raise ValueError(f"step {step}: loss is {loss}")
        # Everything is checked before anything reaches the step.
        checked = [self._section(n, v) for n, v in (sections or {}).items()]
        if len(checked) > 128:
            raise ValueError(f"step {step}: {len(checked)} sections, at most "
                             f"128 (the report must fit the worker's 64 KiB "
                             f"telemetry frame)")
        # Both calls only append to memory: through _fast, keeping the GIL.
        for encoded, seconds in checked:
            _check(_fast.strata_timer_add(self._h, encoded, seconds))
        _check(_fast.strata_timer_end_step(self._h, step, tokens, loss))

    def set_total_steps(self, total):
        """Declares the run's last step (an int >= 0; 0: unknown): the
        coordinator then takes a rank past it as done, not hung, while it
        finishes (a last save, teardown), and estimates the time left."""
        _check(_lib.strata_timer_set_total_steps(
            self._h, _int64("total steps", total)))

    def enable_in_place(self):
        """Opts in to in-place restart (docs/fault.md "In-place restart"):
        when another rank dies or hangs, this one is not restarted; its
        collectives raise RankLost and the loop calls rejoin(). Raises
        StrataError (code 9) when the groups cannot be aborted (mpi, nccl),
        were not built (build_groups=False) or no coordinator announces
        generations."""
        _check(_lib.strata_inplace_enable(self._h))

    @property
    def generation(self):
        """The in-place restart generation of the current groups (0 at
        launch; a replacement rank starts with the new one)."""
        g = ctypes.c_int()
        _check(_lib.strata_inplace_generation(self._h, ctypes.byref(g)))
        return g.value

    def rejoin(self, memory_step, checkpoint_step, timeout_s=60):
        """After RankLost (or, in a replacement, before training): waits
        for the coordinator's next generation, re-forms the groups with the
        replacement and returns the step every rank goes on from.
        `memory_step`: the step this rank's memory holds (-1: none),
        `checkpoint_step`: the newest committed checkpoint it can load (0:
        none). A rank whose memory holds another step loads the returned
        one (0: the initial state)."""
        agreed = ctypes.c_int64()
        _check(_lib.strata_inplace_rejoin(
            self._h, int(timeout_s * 1000), int(memory_step),
            _int64("checkpoint step", checkpoint_step), ctypes.byref(agreed)))
        return agreed.value

    @contextlib.contextmanager
    def phase(self, name, deadline_s=0):
        """Work outside the step loop: `with rt.phase("eval", 1800): ...`.
        While it lasts the rank's hang deadline is `deadline_s` (0: the job
        policy's hang_phase_s, 600 s by default) instead of the step
        deadline, so a long evaluation, save or load is not a hang."""
        encoded, deadline_s = self._section(name, deadline_s)
        _check(_lib.strata_phase_begin(self._h, encoded, deadline_s))
        try:
            yield self
        finally:
            _check(_lib.strata_phase_end(self._h))

    def close(self):
        if self._h:
            _lib.strata_finalize(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def latest_step(uri):
    """The newest committed step of `uri`, or None."""
    step = ctypes.c_int64()
    _check(_lib.strata_ckpt_latest(_name("checkpoint URI", uri),
                                   ctypes.byref(step)))
    return None if step.value < 0 else step.value


def load(uri, step, tensors):
    """Fills each array (name -> array, or Shard for a box of the global
    tensor) from checkpoint `step`, whatever sharding wrote it."""
    step = _int64("checkpoint step", step)
    arr, _keep = _tensors(tensors)
    _check(_lib.strata_ckpt_load(_name("checkpoint URI", uri), step, arr,
                                 len(tensors)))


def load_blob(uri, step, name, rank=None):
    """A blob's bytes; per-rank blobs are named "<rank>/<name>"."""
    full = name if rank is None else f"{rank}/{name}"
    step = _int64("checkpoint step", step)
    curi, cname = _name("checkpoint URI", uri), _name("blob", full)
    size = ctypes.c_size_t()
    _check(_lib.strata_ckpt_load_blob(curi, step, cname, None, 0,
                                      ctypes.byref(size)))
    buf = ctypes.create_string_buffer(size.value)
    _check(_lib.strata_ckpt_load_blob(curi, step, cname, buf, size.value,
                                      ctypes.byref(size)))
    return buf.raw[:size.value]

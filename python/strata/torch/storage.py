"""torch.distributed.checkpoint (DCP) storage on strata's checkpoint engine.

    import torch.distributed.checkpoint as dcp
    from strata.torch import StorageWriter, StorageReader

    dcp.save(state, storage_writer=StorageWriter("file:///ckpt", step=100))
    dcp.async_save(state, storage_writer=StorageWriter("rocksdb:///ckpt", step=200))
    dcp.load(state, storage_reader=StorageReader("file:///ckpt"))  # newest step

Every rank's chunks go through one strata Checkpointer save
(checkpoint/checkpointer.h): each tensor chunk DCP's planner assigns to a
rank is a box of the global tensor (so any later world size loads it, and a
replicated tensor, deduplicated by DCP's planner, is written once), non-tensor
items are per-rank blobs, and DCP's Metadata is a global blob that the
coordinator adds in finish(): the step's manifest, written by rank 0 only
after every rank's data is durable, commits it, so a crash mid-save leaves
the previous step loadable. Checksums are verified on load. `strata ckpt
ls|inspect|verify|export|gc` see these steps like any other.

Requirements: strata's rank 0 is DCP's coordinator (the default process
group, coordinator_rank=0), and every rank of the job takes part in each
save: the processes must run under `strata run` (or `strata submit`,
strata-exec), which gives the commit its rendezvous. A world of one process
needs no launcher.
"""
import concurrent.futures
import io
import pickle
import threading
import time

import torch
from torch.distributed.checkpoint import Metadata
from torch.distributed.checkpoint import StorageReader as _DcpReader
from torch.distributed.checkpoint import StorageWriter as _DcpWriter
from torch.distributed.checkpoint.metadata import StorageMeta
from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future
from torch.utils._pytree import tree_flatten as _tree_flatten
from torch.utils._pytree import tree_unflatten as _tree_unflatten

import strata
from strata.torch import _runtime
from strata.torch import _staging as _bg
from strata.torch.monitor import current as _current_monitor

__all__ = ["StorageWriter", "StorageReader", "parse_checkpoint_id"]

_SCHEMES = ("file://", "rocksdb://")
# The global blob holding DCP's pickled Metadata; its presence is what makes
# a strata step a DCP checkpoint.
METADATA_BLOB = "dcp.metadata"
# dtypes strata's engine stores natively (c_api.h); others are kept as a
# per-rank blob of torch.save'd chunks (still checksummed, not reshardable
# below the chunk).
_NATIVE = {torch.float32, torch.float64, torch.float16, torch.bfloat16,
           torch.int32, torch.int64, torch.uint8}


class _LeafNames:
    """The state-dict paths of the leaves at `indexes` (e.g.
    "['model']['fc.weight']"), worked out only when an error names one."""

    def __init__(self, state_dict, indexes):
        self._sd, self._indexes = state_dict, indexes

    def __getitem__(self, k):
        from torch.utils._pytree import keystr, tree_flatten_with_path
        paths, _ = tree_flatten_with_path(self._sd)
        return keystr(paths[self._indexes[k]][0])


class _StagingSet:
    """Staging tensors of one save (leaf index -> CPU tensor), reused by
    the next save to the same URI once this one is written."""

    def __init__(self):
        self.buffers = {}
        self.busy = False


# Per URI, the staging set kept for the next save.
_staging = {}
_staging_lock = threading.Lock()

# Per URI, the newest step this process started saving: a second save of a
# step in flight (or older) is refused before anything is written.
_started = {}
_started_lock = threading.Lock()


def parse_checkpoint_id(checkpoint_id):
    """(uri, step or None) of "file:///dir", "rocksdb:///dir" or either with
    "?step=N"."""
    text = str(checkpoint_id)
    uri, _, query = text.partition("?step=")
    if not uri.startswith(_SCHEMES) or len(uri) <= len(uri.split("://")[0]) + 3:
        raise ValueError(f"checkpoint id {text!r}: strata's DCP storage needs "
                         f"a file:///DIR or rocksdb:///DIR URI")
    if not query:
        return uri, None
    try:
        return uri, strata._int64("checkpoint step", int(query))
    except ValueError as e:
        raise ValueError(f"checkpoint id {text!r}: {e}") from None


def _check_world(rt):
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        if (dist.get_rank(), dist.get_world_size()) != (rt.rank, rt.world_size):
            raise ValueError(
                f"torch rank {dist.get_rank()} of {dist.get_world_size()} is "
                f"strata rank {rt.rank} of {rt.world_size}: strata's DCP "
                f"storage needs the default process group over every rank "
                f"of the job, in strata's rank order")


class StorageWriter(_DcpWriter):
    """Writes one DCP checkpoint as step `step` of the strata checkpoint at
    `uri` (file:///DIR or rocksdb:///DIR). The step must be newer than
    every step committed there and than every step this process started
    saving (ValueError / strata.StrataError otherwise: a committed step is
    never replaced). `keep_last` > 0 lets rank 0 delete older steps after a
    commit. `async_staging`: async_save returns before the staging copy
    (see stage()). Use one writer per save."""

    def __init__(self, uri, step=None, keep_last=0, async_staging=False,
                 background_staging=True):
        super().__init__()
        self.uri, parsed = parse_checkpoint_id(uri)
        self.step = parsed if step is None else strata._int64(
            "checkpoint step", step)
        self.keep_last = keep_last
        self.async_staging = bool(async_staging)
        self.background_staging = bool(background_staging)
        self._staging = None  # the _StagingSet stage() filled
        self._job = None      # its background copy (strata.torch._staging)
        self._coordinator = False
        self._ck = None
        self._pending = None  # the coordinator's (tensors, blobs) until finish

    # -- DCP's AsyncStager protocol (async_save stages through the writer) --
    # async_save returns once stage() has copied every tensor (DCP's
    # contract: training may then change them). The copy goes into staging
    # tensors this process keeps per URI and reuses at the next save (their
    # pages are already faulted in, so the copy runs at memory speed), and
    # the engine writes straight from them (a borrowed save: no second
    # copy). A save whose staging set is still being written gets a fresh
    # set. By default (background_staging) the copy of CPU tensors is made
    # on a thread, guarded by hooks: an optimizer step waits for all of it,
    # a module's forward for its buffers (strata/torch/_staging.py);
    # background_staging=False copies on the caller's thread. With
    # async_staging=True, stage() returns at once and copies on a thread,
    # unguarded: async_save then returns DCP's AsyncSaveResponse, and the
    # loop must wait for its staging_completion before changing the tensors
    # (before the next optimizer step).
    _synchronize_after_execute = False

    @property
    def should_synchronize_after_execute(self):
        return False

    def stage(self, state_dict):
        start = time.perf_counter()
        if self.async_staging:
            fut = concurrent.futures.Future()

            def run():
                try:
                    fut.set_result(self._stage(state_dict))
                except BaseException as e:  # handed to async_save's future
                    fut.set_exception(e)
            threading.Thread(target=run, name="strata-dcp-stage",
                             daemon=True).start()
            staged = fut
        else:
            staged = self._stage(state_dict, self.background_staging)
        _current_monitor().note("checkpoint", time.perf_counter() - start)
        return staged

    def _stage(self, state_dict, background=False):
        leaves, spec = _tree_flatten(state_dict)
        with _staging_lock:
            cached = _staging.get(self.uri)
            if cached is not None and not cached.busy:
                cached.busy = True
                self._staging = cached
            else:
                self._staging = _StagingSet()
                self._staging.busy = True
        buffers = self._staging.buffers
        out, names, srcs, dsts = [], [], [], []
        for i, v in enumerate(leaves):
            if not isinstance(v, torch.Tensor):
                out.append(v)
                continue
            v = v.detach()
            buf = buffers.get(i)
            if (buf is None or type(buf) is not type(v) or buf.shape != v.shape
                    or buf.dtype != v.dtype or buf.device.type != "cpu"
                    or getattr(buf, "placements", None) != getattr(v, "placements", None)
                    or getattr(buf, "device_mesh", None) is not getattr(v, "device_mesh", None)):
                buf = _bg.staging_like(v)
                buffers[i] = buf
            names.append(i)
            srcs.append(v)
            dsts.append(buf)
            out.append(buf)
        for i in [k for k in buffers if k >= len(leaves)]:
            del buffers[i]
        job = _bg.StagingJob(_LeafNames(state_dict, names), srcs, dsts)
        if background and all(v.device.type == "cpu" for v in srcs):
            self._job = job
            _bg.start(job)
        else:
            job.wait()
            if job.error is not None:
                raise job.error
        return _tree_unflatten(out, spec)

    def _release_staging(self):
        staging, self._staging = self._staging, None
        if staging is not None:
            with _staging_lock:
                staging.busy = False
                _staging[self.uri] = staging

    def synchronize_staging(self):
        pass

    def close(self):
        pass

    # -- DCP's interface ---------------------------------------------------
    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            uri, step = parse_checkpoint_id(checkpoint_id)
            self.uri = uri
            if step is not None:
                self.step = step
        self._ck, self._pending = None, None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        try:
            parse_checkpoint_id(checkpoint_id)
            return True
        except ValueError:
            return False

    def storage_meta(self):
        return StorageMeta(checkpoint_id=self.uri, save_id=str(self.step))

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        if self.step is None:
            raise ValueError(f"StorageWriter({self.uri!r}) needs a step: "
                             f"StorageWriter(uri, step=N) or checkpoint_id="
                             f"'{self.uri}?step=N'")
        rt = _runtime.runtime()
        _check_world(rt)
        if bool(is_coordinator) != (rt.rank == 0):
            raise ValueError(f"DCP's coordinator must be strata rank 0 (this "
                             f"is rank {rt.rank}, coordinator="
                             f"{is_coordinator})")
        with _started_lock:
            last = _started.get(self.uri)
            if last is not None and self.step <= last:
                raise ValueError(
                    f"checkpoint step {self.step} at {self.uri}: step {last} "
                    f"was already started by this process (a save of a step "
                    f"still being written, or an older step); steps must "
                    f"increase")
            _started[self.uri] = self.step
        self._coordinator = bool(is_coordinator)
        self._ck = rt.checkpointer(self.uri, keep_last=self.keep_last)
        self._start = time.perf_counter()

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def write_data(self, plan, planner):
        job, self._job = self._job, None
        if job is not None:  # a background staging copy: help, then wait
            job.wait()
            if job.error is not None:
                self._release_staging()
                raise job.error
        rank = _runtime.runtime().rank
        tensors, blobs, results = [], {}, []
        for item in plan.items:
            data = planner.resolve_data(item)
            fqn = item.index.fqn
            if item.type == WriteItemType.BYTE_IO:
                raw = data.getvalue()
                name = f"dcp/{fqn}"
                blobs[name] = raw
                results.append(WriteResult(item.index, len(raw),
                                           {"blob": f"{rank}/{name}"}))
                continue
            t = data.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            t = t.contiguous()
            chunk = item.tensor_data.chunk
            if t.dtype in _NATIVE:
                tensors.append((fqn, strata.Shard(
                    t, global_shape=tuple(item.tensor_data.size),
                    offset=tuple(chunk.offsets))))
                storage = None
            else:
                name = f"dcp/{fqn}@{','.join(map(str, chunk.offsets))}"
                buf = io.BytesIO()
                torch.save(t, buf)
                blobs[name] = buf.getvalue()
                storage = {"blob": f"{rank}/{name}"}
            results.append(WriteResult(item.index, t.numel() * t.element_size(),
                                       storage))
        if self._coordinator:
            # Saved with DCP's metadata in finish(): the commit must carry it.
            self._pending = (tensors, blobs)
        else:
            self._save(tensors, blobs)
        fut = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata, results):
        storage = {}
        for rank_results in results:
            for r in rank_results:
                if r.storage_data is not None:
                    storage[r.index] = r.storage_data
        metadata.storage_data = storage
        tensors, blobs = self._pending or ([], {})
        self._pending = None
        blobs = dict(blobs)
        # A global blob (no rank prefix): rank 0 writes it.
        self._save(tensors, blobs, metadata=pickle.dumps(metadata))

    # -- internals ----------------------------------------------------------
    def _save(self, tensors, blobs, metadata=None):
        ck, self._ck = self._ck, None
        try:
            # Borrowed (no copy): the tensors are the staged ones, or the
            # caller's own during a synchronous dcp.save, and stay unchanged
            # until the wait below.
            ck.save(self.step, tensors, blobs=blobs, replicated=False,
                    global_blobs={METADATA_BLOB: metadata} if metadata else None,
                    borrow=True)
            ck.wait()  # rank 0: committed; others: durable and reported
        finally:
            ck.close()
            self._release_staging()
        # dcp.save: the training thread's time in the save, for the step
        # monitor (dropped when async_save runs this in the background).
        _current_monitor().note("checkpoint", time.perf_counter() - self._start)


class StorageReader(_DcpReader):
    """Reads a DCP checkpoint written by StorageWriter: step `step` (default:
    the newest committed one) of `uri`. Errors name the step or tensor: a
    missing checkpoint (FileNotFoundError), a strata checkpoint that DCP did
    not write or a tensor whose saved shape or dtype differs (ValueError), a
    corrupt chunk (strata.StrataError, code 15 data loss)."""

    def __init__(self, uri, step=None):
        super().__init__()
        self.uri, parsed = parse_checkpoint_id(uri)
        self.step = parsed if step is None else strata._int64(
            "checkpoint step", step)
        self._metadata = None

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.uri, step = parse_checkpoint_id(checkpoint_id)
            self.step = step
        self._metadata = None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return StorageWriter.validate_checkpoint_id(checkpoint_id)

    def _resolve_step(self):
        if self.step is None:
            latest = strata.latest_step(self.uri)
            if latest is None:
                raise FileNotFoundError(
                    f"no committed checkpoint at {self.uri}")
            self.step = latest
        return self.step

    def read_metadata(self, *args, **kwargs):
        step = self._resolve_step()
        try:
            raw = strata.load_blob(self.uri, step, METADATA_BLOB)
        except strata.StrataError as e:
            if e.code == 5:  # NOT_FOUND
                if strata.latest_step(self.uri) is None:
                    raise FileNotFoundError(
                        f"no committed checkpoint at {self.uri}") from None
                raise ValueError(
                    f"checkpoint step {step} at {self.uri} was not written "
                    f"by strata.torch.StorageWriter (it has no DCP "
                    f"metadata): {e}") from None
            raise
        md = pickle.loads(raw)
        if not isinstance(md, Metadata):
            raise ValueError(f"checkpoint step {step} at {self.uri}: its DCP "
                             f"metadata is a {type(md).__name__}")
        return md

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self._metadata = metadata
        self._resolve_step()

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan, planner):
        md = self._metadata
        storage = md.storage_data or {}
        current = getattr(planner, "state_dict", None) or {}
        pending = []  # (read item, staging tensor)
        boxes = []    # (fqn, Shard) for one strata load
        for item in plan.items:
            fqn = item.storage_index.fqn
            if item.type == LoadItemType.BYTE_IO:
                raw = strata.load_blob(self.uri, self.step,
                                       storage[item.storage_index]["blob"])
                planner.load_bytes(item, io.BytesIO(raw))
                continue
            saved = md.state_dict_metadata[fqn]
            self._check_shape(fqn, saved, current.get(fqn))
            where = storage.get(item.storage_index)
            if where is not None:
                chunk = torch.load(io.BytesIO(strata.load_blob(
                    self.uri, self.step, where["blob"])), weights_only=True)
                for d, (o, n) in enumerate(zip(item.storage_offsets,
                                               item.lengths)):
                    chunk = chunk.narrow(d, o, n)
                self._commit(planner, item, chunk)
                continue
            staging = torch.empty(tuple(item.lengths),
                                  dtype=saved.properties.dtype)
            offset = tuple(o + s for o, s in zip(item.storage_index.offset,
                                                 item.storage_offsets))
            boxes.append((fqn, strata.Shard(staging,
                                            global_shape=tuple(saved.size),
                                            offset=offset)))
            pending.append((item, staging))
        if boxes:
            strata.load(self.uri, self.step, boxes)
        for item, staging in pending:
            self._commit(planner, item, staging)
        fut = Future()
        fut.set_result(None)
        return fut

    # -- internals ----------------------------------------------------------
    def _check_shape(self, fqn, saved, target):
        shape = getattr(target, "shape", None)
        if shape is None:
            return
        if tuple(shape) != tuple(saved.size):
            raise ValueError(
                f"tensor {fqn!r}: shape {tuple(shape)} differs from the "
                f"saved {tuple(saved.size)} (checkpoint step {self.step} at "
                f"{self.uri})")
        if target.dtype != saved.properties.dtype:
            raise ValueError(
                f"tensor {fqn!r}: dtype {target.dtype} differs from the "
                f"saved {saved.properties.dtype} (checkpoint step "
                f"{self.step} at {self.uri})")

    @staticmethod
    def _commit(planner, item, data):
        target = planner.resolve_tensor(item).detach()
        if target.shape != data.shape:
            raise ValueError(f"tensor {item.dest_index.fqn!r}: read box "
                             f"{tuple(data.shape)} does not fit the target "
                             f"{tuple(target.shape)}")
        target.copy_(data)
        planner.commit_tensor(item, target)

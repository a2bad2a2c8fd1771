"""`strata-bench dcp`: torch.distributed.checkpoint's async_save through
strata.torch.StorageWriter against DCP's own FileSystemWriter and against
torch.save, on the same state, in one process (bench/dcp_bench.cc runs it
with the venv's python).

  dcp_peer.py DIR GIB RUNS

Per run: the disk (1 GiB-blocks written and fsynced, the rate a save can
reach), torch.save + fsync, FileSystemWriter's synchronous dcp.save (the
stall a user has today), FileSystemWriter's async_save, and strata's
async_save: its stall (until async_save returns: DCP has staged the
tensors) and its persist time (until the future is done: committed).
Prints one JSON line per run, then the worst run's table.
"""
import json
import os
import shutil
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

import strata.torch


def state(gib):
    n = 16
    per = int(gib * (1 << 30)) // n // 4
    return {f"layer{i}.weight": torch.full((per,), float(i)) for i in range(n)}


def nbytes(sd):
    return sum(t.numel() * t.element_size() for t in sd.values())


def fsync_dir(path):
    for root, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)


def disk_rate(dir, size):
    block = b"\1" * (64 << 20)
    path = os.path.join(dir, "disk.bin")
    t = time.perf_counter()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            f.write(block[:min(left, len(block))])
            left -= len(block)
        f.flush()
        os.fsync(f.fileno())
    s = time.perf_counter() - t
    os.remove(path)
    return size / s


def one_run(dir, sd, step):
    size = nbytes(sd)
    r = {"bytes": size, "disk_gbps": disk_rate(dir, size) / 1e9}

    path = os.path.join(dir, "torch.pt")
    t = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(sd, f)
        f.flush()
        os.fsync(f.fileno())
    r["torch_save_s"] = time.perf_counter() - t
    os.remove(path)

    fs = os.path.join(dir, "fs")
    t = time.perf_counter()
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(fs, sync_files=True))
    r["fs_sync_save_s"] = time.perf_counter() - t
    shutil.rmtree(fs)

    t = time.perf_counter()
    fut = dcp.async_save(sd, storage_writer=dcp.FileSystemWriter(fs, sync_files=True))
    r["fs_async_stall_s"] = time.perf_counter() - t
    fut.result()
    r["fs_async_total_s"] = time.perf_counter() - t
    shutil.rmtree(fs)

    uri = "file://" + os.path.join(dir, "strata")
    t = time.perf_counter()
    fut = dcp.async_save(sd, storage_writer=strata.torch.StorageWriter(uri, step=step))
    r["strata_async_stall_s"] = time.perf_counter() - t
    fut.result()
    r["strata_async_total_s"] = time.perf_counter() - t
    r["strata_persist_gbps"] = size / r["strata_async_total_s"] / 1e9
    r["stall_ratio_vs_fs_sync"] = r["fs_sync_save_s"] / r["strata_async_stall_s"]
    r["persist_vs_disk"] = r["strata_persist_gbps"] / r["disk_gbps"]
    r["persist_vs_torch_save"] = r["torch_save_s"] / r["strata_async_total_s"]
    return r


def main():
    dir, gib, runs = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    os.makedirs(dir, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    store = dist.FileStore(os.path.join(dir, "pg.store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    sd = state(gib)
    results = []
    for i in range(runs):
        r = one_run(dir, sd, step=i + 1)
        print(json.dumps(r), flush=True)
        results.append(r)
    shutil.rmtree(os.path.join(dir, "strata"), ignore_errors=True)
    worst = min(results, key=lambda r: min(r["stall_ratio_vs_fs_sync"] / 20,
                                           r["persist_vs_disk"] / 0.8))
    print(f"\nDCP async_save, {worst['bytes'] / (1 << 30):.2f} GiB, one process, "
          f"worst of {runs} runs (goal: stall <= 1/20 of FileSystemWriter's "
          f"sync save, persist >= 80% of the disk)")
    rows = [
        ("disk write + fsync", f"{worst['disk_gbps']:.2f} GB/s"),
        ("torch.save + fsync", f"{worst['torch_save_s']:.3f} s"),
        ("FileSystemWriter dcp.save (sync)", f"{worst['fs_sync_save_s']:.3f} s"),
        ("FileSystemWriter async_save stall", f"{worst['fs_async_stall_s']:.3f} s"),
        ("strata async_save stall", f"{worst['strata_async_stall_s']:.3f} s "
         f"(1/{worst['stall_ratio_vs_fs_sync']:.1f} of the sync save)"),
        ("strata async_save persisted", f"{worst['strata_async_total_s']:.3f} s = "
         f"{worst['strata_persist_gbps']:.2f} GB/s "
         f"({100 * worst['persist_vs_disk']:.0f}% of the disk, "
         f"{worst['persist_vs_torch_save']:.2f}x torch.save)"),
    ]
    for name, value in rows:
        print(f"  {name:36s} {value}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

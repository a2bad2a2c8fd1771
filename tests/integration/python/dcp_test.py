"""torch.distributed.checkpoint (DCP) save/load/async_save unchanged on
strata.torch.StorageWriter/StorageReader, one process (a world of one needs
no launcher): round trips on file:// and rocksdb://, `strata ckpt
ls|inspect|verify|export|gc` work on the steps (a corrupt one fails verify
and its load; gc keeps the newest that verifies), and bad input (missing or foreign checkpoint, changed shape, corrupt
chunk, unknown URI, a step saved twice, a crash mid-save) is a clear Python
exception that leaves every committed step loadable.

Run by dcp_test.sh with the venv's python (torch 2.x).
"""
import glob
import json
import os
import struct
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import torch
import torch.distributed.checkpoint as dcp

import strata
from strata.torch import StorageReader, StorageWriter
from strata.torch import _staging


def state(seed):
    g = torch.Generator().manual_seed(seed)
    return {
        "w": torch.randn(64, 32, generator=g),
        "b": torch.randn(32, generator=g).to(torch.bfloat16),
        "i": torch.arange(10, dtype=torch.int64),
        "mask": torch.rand(7, generator=g) > 0.5,   # bool: not native
        "step": 17,                                 # bytes item
        "nested": {"lr": 0.5, "t": torch.ones(3)},
    }


def zeros_like(sd):
    out = {}
    for k, v in sd.items():
        if isinstance(v, dict):
            out[k] = zeros_like(v)
        elif isinstance(v, torch.Tensor):
            out[k] = torch.zeros_like(v)
        else:
            out[k] = None
    return out


def assert_equal(test, a, b):
    test.assertEqual(a.keys(), b.keys())
    for k in a:
        if isinstance(a[k], dict):
            assert_equal(test, a[k], b[k])
        elif isinstance(a[k], torch.Tensor):
            test.assertTrue(torch.equal(a[k], b[k]), k)
        else:
            test.assertEqual(a[k], b[k], k)


class DcpTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="strata-dcp-")
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def uri(self, scheme="file"):
        return f"{scheme}://{self.dir}/ck"

    def roundtrip(self, scheme):
        uri = self.uri(scheme)
        a, b = state(1), state(2)
        dcp.save(a, storage_writer=StorageWriter(uri, step=10))
        dcp.save(b, storage_writer=StorageWriter(uri, step=20))
        self.assertEqual(strata.latest_step(uri), 20)
        for step, want in ((10, a), (20, b), (None, b)):
            got = zeros_like(want)
            dcp.load(got, storage_reader=StorageReader(uri, step=step))
            assert_equal(self, got, want)

    def test_roundtrip_file(self):
        self.roundtrip("file")

    def test_roundtrip_rocksdb(self):
        self.roundtrip("rocksdb")

    def test_checkpoint_id_form(self):
        uri = self.uri()
        a = state(3)
        dcp.save(a, checkpoint_id=f"{uri}?step=5",
                 storage_writer=StorageWriter(uri))
        got = zeros_like(a)
        dcp.load(got, checkpoint_id=f"{uri}?step=5",
                 storage_reader=StorageReader(uri))
        assert_equal(self, got, a)

    def test_async_save(self):
        uri = self.uri()
        a = state(4)
        before = a["w"].clone()
        fut = dcp.async_save(a, storage_writer=StorageWriter(
            uri, step=1, background_staging=False))
        a["w"].add_(1.0)  # training goes on: the saved values are the staged ones
        fut.result()
        got = zeros_like(a)
        dcp.load(got, storage_reader=StorageReader(uri))
        self.assertTrue(torch.equal(got["w"], before))

    def test_async_staging_and_reused_staging(self):
        # async_staging: async_save returns before the copy (DCP's
        # AsyncSaveResponse); once staging_completion is done training may
        # change the tensors. The next save reuses the staging tensors and
        # still saves its own values.
        uri = self.uri()
        a = state(4)
        want = [a["w"].clone()]
        resp = dcp.async_save(a, storage_writer=StorageWriter(uri, step=1, async_staging=True))
        resp.staging_completion.result()
        a["w"].add_(1.0)
        resp.upload_completion.result()
        for step in (2, 3):
            want.append(a["w"].clone())
            dcp.async_save(a, storage_writer=StorageWriter(uri, step=step)).result()
            a["w"].add_(1.0)
        for step, w in enumerate(want, start=1):
            got = zeros_like(a)
            dcp.load(got, storage_reader=StorageReader(uri, step=step))
            self.assertTrue(torch.equal(got["w"], w), step)

    def test_background_staging_is_guarded(self):
        # Default async_save: the copy runs on a thread. A forward waits for
        # the module's buffers, an optimizer step for everything: the step
        # saves the values of before them. Copies are held back until the
        # loop has run, so the guards (not luck) make the result.
        uri = self.uri()
        model = torch.nn.Sequential(torch.nn.Linear(256, 256),
                                    torch.nn.BatchNorm1d(256))
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        sd = {"model": model.state_dict()}
        want = {k: v.clone() for k, v in sd["model"].items()}
        gate = threading.Event()
        real_start = _staging.StagingJob.start
        _staging.StagingJob.start = lambda job: None  # no copier thread
        real_wait = _staging.StagingJob.wait

        def gated_wait(job):  # DCP's upload thread waits for the loop
            if threading.current_thread() is not threading.main_thread():
                gate.wait(30)
            real_wait(job)
        _staging.StagingJob.wait = gated_wait
        try:
            fut = dcp.async_save(sd, storage_writer=StorageWriter(uri, step=1))
            model(torch.randn(8, 256)).sum().backward()  # changes BN stats
            opt.step()  # changes the weights
            gate.set()
            fut.result()
        finally:
            _staging.StagingJob.start = real_start
            _staging.StagingJob.wait = real_wait
            gate.set()
        got = {"model": {k: torch.zeros_like(v) for k, v in want.items()}}
        dcp.load(got, storage_reader=StorageReader(uri))
        for k, v in want.items():
            self.assertTrue(torch.equal(got["model"][k], v), k)
        self.assertFalse(torch.equal(model[0].weight, want["0.weight"]))

    def test_background_staging_catches_other_changes(self):
        # An in-place change outside a forward or an optimizer step before
        # its copy: the save fails naming the tensor, nothing is committed.
        uri = self.uri()
        a = {"w": torch.ones(1000), "v": torch.ones(10)}
        real_start = _staging.StagingJob.start
        _staging.StagingJob.start = lambda job: None
        gate = threading.Event()
        real_wait = _staging.StagingJob.wait

        def gated_wait(job):
            if threading.current_thread() is not threading.main_thread():
                gate.wait(30)
            real_wait(job)
        _staging.StagingJob.wait = gated_wait
        try:
            fut = dcp.async_save(a, storage_writer=StorageWriter(uri, step=1))
            a["w"].add_(1.0)
            gate.set()
            with self.assertRaises(BaseException) as err:  # DCP's CheckpointException
                fut.result()
            self.assertIn("['w']\" was changed in place", str(err.exception))
        finally:
            _staging.StagingJob.start = real_start
            _staging.StagingJob.wait = real_wait
            gate.set()
        self.assertIsNone(strata.latest_step(uri))

    def test_cli_sees_the_steps(self):
        uri = self.uri()
        dcp.save(state(5), storage_writer=StorageWriter(uri, step=3))
        ls = subprocess.run(["strata", "ckpt", "ls", uri], capture_output=True,
                            text=True, timeout=60)
        self.assertEqual(ls.returncode, 0, ls.stderr)
        self.assertIn("3", ls.stdout)
        verify = subprocess.run(["strata", "ckpt", "verify", uri, "--step", "3"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)

    def ckpt(self, *args, rc=0):
        r = subprocess.run(["strata", "ckpt", *args], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, rc, r.stdout + r.stderr)
        return r.stdout + r.stderr

    def corrupt(self, step):
        data = f"{self.dir}/ck/step-{step:012d}/rank-00000.data"
        with open(data, "r+b") as f:
            f.seek(100)
            byte = f.read(1)
            f.seek(100)
            f.write(bytes([byte[0] ^ 0xFF]))

    def test_cli_inspect_export_gc(self):
        # `strata ckpt inspect|export|verify|gc` on DCP steps: the tensors
        # are strata tensors (DCP's flattened names), the rest blobs; the
        # export holds the saved values; a corrupt step fails verify and
        # its load, gc keeps the newest step that verifies and DCP loads it.
        uri = self.uri()
        for s in (1, 2, 3):
            dcp.save(state(s), storage_writer=StorageWriter(uri, step=s))
        out = self.ckpt("inspect", uri, "--step", "2")
        for want in (r"w\s+F32\s+\[64,32\]\s+8192\s+1", r"b\s+BF16\s+\[32\]",
                     r"nested\.t\s+F32\s+\[3\]", r"blob 0/dcp/mask@0 ",
                     r"blob dcp\.metadata "):
            self.assertRegex(out, want)
        path = f"{self.dir}/out.safetensors"
        self.ckpt("export", uri, "--step", "3", "--out", path)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
            data = f.read()
        want = state(3)
        for name, t in (("w", want["w"]), ("b", want["b"]),
                        ("nested.t", want["nested"]["t"])):
            begin, end = header[name]["data_offsets"]
            self.assertEqual(header[name]["shape"], list(t.shape))
            got = torch.frombuffer(bytearray(data[begin:end]), dtype=t.dtype)
            self.assertTrue(torch.equal(got.view(t.shape), t), name)
        self.corrupt(3)
        self.assertRegex(self.ckpt("verify", uri, "--step", "3", rc=2),
                         "step 3: tensor 'w' chunk 0 .*checksum mismatch")
        # DCP wraps the rank's exception in a CheckpointException.
        with self.assertRaisesRegex(BaseException,
                                    "strata error 15: tensor 'w' chunk 0 .*checksum mismatch"):
            dcp.load(zeros_like(want), storage_reader=StorageReader(uri, step=3))
        out = self.ckpt("gc", uri, "--keep", "1")
        self.assertIn("removed 1 checkpoint(s), kept 2", out)
        self.assertIn("step 3 is newer than the newest verifiable step", out)
        self.assertRegex(self.ckpt("ls", uri), r"^\s+step.*\n\s+2\s+1\s+4 .*\n\s+3\s+1\s+4 ")
        got = zeros_like(want)
        dcp.load(got, storage_reader=StorageReader(uri, step=2))
        assert_equal(self, got, state(2))

    def test_missing_checkpoint(self):
        with self.assertRaisesRegex(BaseException, "no committed checkpoint at"):
            dcp.load(zeros_like(state(1)), storage_reader=StorageReader(self.uri()))

    def test_foreign_checkpoint(self):
        uri = self.uri()
        rt = strata.Runtime()
        ck = rt.checkpointer(uri)
        ck.save(1, {"w": torch.zeros(4)})
        ck.close()
        with self.assertRaisesRegex(BaseException, "step 1 at .* was not written by strata.torch"):
            dcp.load({"w": torch.zeros(4)}, storage_reader=StorageReader(uri))

    def test_shape_differs(self):
        uri = self.uri()
        dcp.save({"w": torch.ones(4, 4)}, storage_writer=StorageWriter(uri, step=1))
        with self.assertRaisesRegex(BaseException, r"saved torch.Size\(\[4, 4\]\) and current: torch.Size\(\[4, 5\]\) for w"):
            dcp.load({"w": torch.zeros(4, 5)}, storage_reader=StorageReader(uri))

    def test_corrupt_chunk(self):
        uri = self.uri()
        dcp.save({"w": torch.ones(1024, 64)}, storage_writer=StorageWriter(uri, step=1))
        data = [f for f in glob.glob(f"{self.dir}/ck/**/*.data", recursive=True)]
        self.assertTrue(data, os.listdir(f"{self.dir}/ck"))
        with open(data[0], "r+b") as f:
            f.seek(4096)
            byte = f.read(1)
            f.seek(4096)
            f.write(bytes([byte[0] ^ 0xFF]))
        with self.assertRaisesRegex(BaseException, "strata error 15: tensor 'w' chunk 0 .* checksum mismatch"):
            dcp.load({"w": torch.zeros(1024, 64)}, storage_reader=StorageReader(uri))

    def test_unknown_uri(self):
        for bad in ("s3://bucket/x", "/plain/path", "file://"):
            with self.assertRaisesRegex(ValueError, "file:///DIR or rocksdb:///DIR"):
                StorageWriter(bad, step=1)
        self.assertFalse(StorageWriter.validate_checkpoint_id("s3://b"))
        self.assertTrue(StorageReader.validate_checkpoint_id("file:///x"))

    def test_step_saved_twice(self):
        uri = self.uri()
        dcp.save({"w": torch.ones(4)}, storage_writer=StorageWriter(uri, step=7))
        with self.assertRaisesRegex(BaseException, "checkpoint step 7 at .*steps must increase"):
            dcp.save({"w": torch.zeros(4)}, storage_writer=StorageWriter(uri, step=7))
        got = {"w": torch.zeros(4)}
        dcp.load(got, storage_reader=StorageReader(uri))
        self.assertTrue(torch.equal(got["w"], torch.ones(4)))

    def test_writer_needs_a_step(self):
        with self.assertRaisesRegex(BaseException, "needs a step"):
            dcp.save({"w": torch.ones(4)}, storage_writer=StorageWriter(self.uri()))

    def test_crash_mid_save_keeps_the_previous_step(self):
        uri = self.uri()
        dcp.save({"w": torch.ones(4)}, storage_writer=StorageWriter(uri, step=1))
        # A second process saves 256 MiB as step 2 and is killed while writing.
        child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import sys, torch, torch.distributed.checkpoint as dcp
            from strata.torch import StorageWriter
            sd = {{"w": torch.ones(4), "big": torch.ones(64, 1024, 1024)}}
            print("saving", flush=True)
            dcp.save(sd, storage_writer=StorageWriter({uri!r}, step=2))
            print("saved", flush=True)
            """)], stdout=subprocess.PIPE, text=True)
        self.assertEqual(child.stdout.readline().strip(), "saving")
        # Kill once the step's data file is being written.
        data = f"{self.dir}/ck/step-000000000002/rank-00000.data"
        for _ in range(2000):  # <= 10 s
            if os.path.exists(data) and os.path.getsize(data) > 0:
                break
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait()
        self.assertEqual(strata.latest_step(uri), 1)
        got = {"w": torch.zeros(4)}
        dcp.load(got, storage_reader=StorageReader(uri))
        self.assertTrue(torch.equal(got["w"], torch.ones(4)))


if __name__ == "__main__":
    unittest.main(verbosity=2)

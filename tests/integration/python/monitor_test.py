"""strata.torch's step monitor in one process: a DDP model (gloo, world of
one) and Adam under monitor(); every step's report carries forward,
backward, optimizer and the all-reduce wait, each finite and >= 0; the wait
runs from the last gradient's accumulation to the optimizer step, after the
first step only the parameters ready last are watched, and the monitor
leaves the gradients DDP's own all-reduce gives. Reports
go to a recording runtime (the real one is checked by the DDP job tests).
"""
import math
import os
import tempfile
import time
import unittest

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import strata
import strata.torch


class Recorder:
    def __init__(self):
        self.steps = []

    def end_step(self, step, tokens=0, loss=math.nan, sections=None):
        self.steps.append((step, tokens, loss, dict(sections or {})))


def make(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 1))


class MonitorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="strata-monitor-")
        store = dist.FileStore(os.path.join(cls.tmp.name, "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()
        cls.tmp.cleanup()

    def test_sections_of_a_ddp_step(self):
        model = DDP(make())
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        rec = Recorder()
        mon = strata.torch.StepMonitor(model, opt, runtime=rec)
        x, y = torch.randn(16, 32), torch.randn(16, 1)
        for s in range(1, 4):
            with mon.step(s, tokens=16) as st:
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
                st.loss = loss
        mon.close()
        self.assertEqual([r[0] for r in rec.steps], [1, 2, 3])
        for step, tokens, loss, sections in rec.steps:
            self.assertEqual(tokens, 16)
            self.assertTrue(math.isfinite(loss))
            self.assertEqual(set(sections),
                             {"forward", "backward", "optimizer", "wait"})
            for name, v in sections.items():
                self.assertTrue(math.isfinite(v) and v >= 0, (name, v))
            self.assertGreater(sections["forward"], 0)
            self.assertGreater(sections["optimizer"], 0)

    def test_wait_runs_from_the_last_gradient_to_the_optimizer(self):
        # Twelve parameters: after the first step the monitor keeps gradient
        # hooks on the _WATCHED ready last. A pause between backward and
        # the optimizer step stands for the all-reduce's wait.
        torch.manual_seed(1)
        model = DDP(torch.nn.Sequential(
            *[torch.nn.Linear(16, 16) for _ in range(6)]))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        rec = Recorder()
        mon = strata.torch.StepMonitor(model, opt, runtime=rec)
        x = torch.randn(4, 16)
        for s in range(1, 4):
            with mon.step(s):
                model(x).sum().backward()
                time.sleep(0.05)
                opt.step()
        self.assertEqual(len(mon._grad_hooks), mon._WATCHED)
        for _, _, _, sections in rec.steps:
            self.assertGreaterEqual(sections["wait"], 0.05)
            self.assertLess(sections["backward"], 0.05)
        mon.close()
        self.assertEqual(mon._grad_hooks, [])

    def test_monitor_keeps_the_gradients(self):
        x, y = torch.randn(16, 32), torch.randn(16, 1)
        grads = []
        for hooked in (False, True):
            model = DDP(make(seed=3))
            if hooked:
                strata.torch.StepMonitor(model, None, runtime=Recorder())
            (model(x) - y).pow(2).mean().backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for a, b in zip(*grads):
            self.assertTrue(torch.equal(a, b))

    def test_checkpoint_section(self):
        # The training thread's part of strata.torch saves is the step's
        # `checkpoint` section: all of a dcp.save, only the staging of an
        # async_save (its background write is not the loop's time).
        import torch.distributed.checkpoint as dcp
        uri = f"file://{self.tmp.name}/ck"
        rec = Recorder()
        strata.torch.monitor(runtime=rec)
        sd = {"w": torch.randn(256, 1024)}
        with strata.torch.step(1):
            dcp.save(sd, storage_writer=strata.torch.StorageWriter(uri, step=1))
        with strata.torch.step(2):
            fut = dcp.async_save(sd, storage_writer=strata.torch.StorageWriter(uri, step=2))
        fut.result()
        with strata.torch.step(3):
            pass
        sync, stage, none = (r[3].get("checkpoint") for r in rec.steps)
        self.assertGreater(sync, 0)
        self.assertGreater(stage, 0)
        self.assertIsNone(none)

    def test_a_failed_step_is_reported_without_loss(self):
        rec = Recorder()
        mon = strata.torch.StepMonitor(runtime=rec)
        with self.assertRaises(RuntimeError):
            with mon.step(5, loss=1.0):
                raise RuntimeError("boom")
        self.assertEqual(rec.steps[0][0], 5)
        self.assertTrue(math.isnan(rec.steps[0][2]))

    def test_bad_step(self):
        mon = strata.torch.StepMonitor(runtime=Recorder())
        with self.assertRaisesRegex(ValueError, "out of range"):
            with mon.step(-1):
                pass

    def test_real_runtime(self):
        # A world of one without a worker: reports are kept, not sent.
        mon = strata.torch.StepMonitor(make(), None)
        with mon.step(1, tokens=4):
            make()(torch.randn(2, 32))


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""The Python package rejects a careless user's input with a clear exception
before ctypes can wrap, truncate or drop it (issue: out-of-range steps, a
negative step, replacing a committed step, NUL in names, num_replicas=0,
NaN sections, a report too big for the telemetry frame).

Usage: python3 bad_input_test.py SOURCE_DIR  (STRATA_LIB names libstrata.so).
One process, no launcher: the runtime is a world of one.
"""
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(sys.argv.pop(1), "python"))
import numpy as np  # noqa: E402

import strata  # noqa: E402


class BadInputTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="strata-py-bad-")
        self.uri = "file://" + self.dir.name
        self.rt = strata.Runtime()
        self.ck = self.rt.checkpointer(self.uri, keep_last=0)
        self.w = np.arange(4, dtype=np.float32)

    def tearDown(self):
        self.ck.close()
        self.rt.close()
        self.dir.cleanup()

    def test_step_beyond_int64_is_not_wrapped(self):
        with self.assertRaisesRegex(ValueError, r"checkpoint step 18446744073709551628 is out of range"):
            self.ck.save(2**64 + 12, {"w": self.w})
        self.ck.wait()
        self.assertIsNone(strata.latest_step(self.uri))
        with self.assertRaisesRegex(ValueError, r"step 18446744073709551621 is out of range"):
            self.rt.end_step(2**64 + 5)

    def test_negative_step_writes_nothing(self):
        with self.assertRaisesRegex(ValueError, r"step -3 is out of range"):
            self.ck.save(-3, {"w": self.w})
        self.ck.wait()
        # Only the catalog rank 0 opens with the checkpointer: no manifest,
        # no rank files.
        self.assertEqual(set(os.listdir(self.dir.name)) - {"catalog.rocksdb"},
                         set())

    def test_non_int_step(self):
        with self.assertRaisesRegex(TypeError, "step must be an int"):
            self.ck.save(1.5, {"w": self.w})

    def test_committed_step_is_not_replaced(self):
        self.ck.save(7, {"w": self.w})
        self.ck.wait()
        with self.assertRaisesRegex(strata.StrataError, "step 7 is not newer than step 7"):
            self.ck.save(7, {"w": self.w * 2})
        out = np.zeros(4, dtype=np.float32)
        strata.load(self.uri, 7, {"w": out})
        np.testing.assert_array_equal(out, self.w)

    def test_nul_in_names(self):
        with self.assertRaisesRegex(ValueError, "tensor name 'a\\\\x00b' contains a NUL"):
            self.ck.save(1, {"a\0b": self.w})
        with self.assertRaisesRegex(ValueError, "section name 'fw\\\\x00d' contains a NUL"):
            self.rt.end_step(1, sections={"fw\0d": 0.1})
        with self.assertRaisesRegex(ValueError, "blob name"):
            self.ck.save(1, {}, blobs={"r\0ng": b"x"})

    def test_num_replicas_zero(self):
        with self.assertRaisesRegex(ValueError, "num_replicas must be an int >= 1, got 0"):
            strata.Shard(self.w, num_replicas=0)
        with self.assertRaisesRegex(ValueError, r"replica_id must be an int in \[0, 2\)"):
            strata.Shard(self.w, replica_id=2, num_replicas=2)

    def test_nan_sections(self):
        for bad in (math.nan, math.inf, -1.0):
            with self.assertRaisesRegex(ValueError, "section 'forward'"):
                self.rt.end_step(1, sections={"forward": bad})
        with self.assertRaisesRegex(ValueError, "loss is inf"):
            self.rt.end_step(1, loss=math.inf)
        self.rt.end_step(1, loss=math.nan, sections={"forward": 0.25})

    def test_report_larger_than_the_frame(self):
        with self.assertRaisesRegex(ValueError, "longer than 64 bytes"):
            self.rt.end_step(1, sections={"x" * 65: 0.1})
        sections = {f"section{i}": 0.001 for i in range(129)}
        with self.assertRaisesRegex(ValueError, "129 sections, at most 128.*64 KiB"):
            self.rt.end_step(2, sections=sections)
        # ... and again in the C API, one section at a time.
        for i in range(128):
            self.rt.add_section(f"s{i}", 0.001)
        with self.assertRaisesRegex(strata.StrataError, "64 KiB"):
            self.rt.add_section("one-more", 0.001)
        self.rt.end_step(2)
        self.rt.end_step(3, sections={"forward": 0.1})

    def test_keep_last(self):
        with self.assertRaisesRegex(ValueError, "keep_last must be an int >= 0"):
            self.rt.checkpointer(self.uri, keep_last=-1)


if __name__ == "__main__":
    unittest.main(verbosity=2)

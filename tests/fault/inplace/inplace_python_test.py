"""The Python binding of in-place restart (docs/fault.md "In-place
restart"): opting in where it cannot work says why (StrataError code 9),
the generation of a launch is 0, rejoin without opting in is refused, and
the collectives' peer-loss codes raise RankLost (a StrataError).

Usage: python3 inplace_python_test.py SOURCE_DIR  (STRATA_LIB names
libstrata.so). One process, no launcher: a world of one, no coordinator.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(sys.argv.pop(1), "python"))
import strata  # noqa: E402


class InPlaceBindingTest(unittest.TestCase):
    def test_without_groups_opting_in_says_why(self):
        rt = strata.Runtime()  # build_groups=False
        try:
            with self.assertRaisesRegex(strata.StrataError,
                                        r"error 9: .*needs strata's groups"):
                rt.enable_in_place()
            self.assertEqual(rt.generation, 0)
            with self.assertRaisesRegex(strata.StrataError,
                                        r"error 9: .*not enabled"):
                rt.rejoin(5, 5, timeout_s=1)
        finally:
            rt.close()

    def test_without_a_coordinator_opting_in_says_why(self):
        rt = strata.Runtime(build_groups=True)
        try:
            with self.assertRaisesRegex(strata.StrataError,
                                        r"error 9: .*coordinator's store"):
                rt.enable_in_place()
        finally:
            rt.close()

    def test_bad_steps_are_refused(self):
        rt = strata.Runtime()
        try:
            with self.assertRaisesRegex(strata.StrataError, r"error 3: "):
                rt.rejoin(-2, 0)
        finally:
            rt.close()

    def test_peer_loss_codes_raise_rank_lost(self):
        for code in (4, 10, 14):
            with self.assertRaises(strata.RankLost):
                strata._check(code)
        with self.assertRaises(strata.StrataError) as e:
            strata._check(3)
        self.assertNotIsInstance(e.exception, strata.RankLost)


if __name__ == "__main__":
    unittest.main()

"""Bundles libstrata into the wheel when one is given (pyproject.toml holds
the metadata).

$STRATA_WHEEL_LIB names a built libstrata.so.<major> (`make package` passes
build/runtime/libstrata.so.0). With it, the file is copied to
strata/_libs/ and the wheel is tagged py3-none-<platform>: one wheel for
every Python 3 (the package uses ctypes, not the CPython ABI), for this
platform only. Without it the wheel is pure Python and strata._library finds
the system's library (the Debian package `strata`) or $STRATA_LIB.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: sdists and in-place installs only
    bdist_wheel = None

LIB = os.environ.get("STRATA_WHEEL_LIB", "")
SONAME = "libstrata.so.0"  # strata._library.py's SONAME


class BuildPy(build_py):
    def run(self):
        super().run()
        if LIB:
            if not os.path.isfile(LIB):
                raise SystemExit(f"STRATA_WHEEL_LIB={LIB!r}: no such file")
            dest = os.path.join(self.build_lib, "strata", "_libs")
            os.makedirs(dest, exist_ok=True)
            shutil.copyfile(LIB, os.path.join(dest, SONAME))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return bool(LIB)  # platform wheel only when the library is inside


cmdclass = {"build_py": BuildPy}
if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        def get_tag(self):
            python, abi, plat = super().get_tag()
            return ("py3", "none", plat) if LIB else (python, abi, plat)

    cmdclass["bdist_wheel"] = BdistWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)

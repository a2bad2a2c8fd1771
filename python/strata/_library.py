"""Finding and loading libstrata (the C API, include/strata/c_api.h).

Where the library is looked for, in order (the first that loads wins):

1. ``$STRATA_LIB``: a path to the library; when set, nothing else is tried.
2. The wheel's own copy: ``strata/_libs/libstrata.so.<major>`` next to this
   file (``pip install`` of a wheel built with the library bundled).
3. The install this package belongs to: ``<prefix>/lib/libstrata.so.<major>``
   for a package installed as ``<prefix>/lib/python3/dist-packages/strata``
   (the Debian package python3-strata, or ``cmake --install``).
4. The dynamic loader's search path by SONAME (``ldconfig`` cache,
   ``LD_LIBRARY_PATH``): a ``strata`` Debian package or ``/usr/local``.

Never a path relative to a source checkout. When nothing loads, ImportError
lists every place tried and why each failed.
"""

import ctypes
import os
from typing import List, Tuple

# The SONAME's major version (libstrata.so.0 while the project is 0.x);
# cmake/StrataInstall.cmake sets it from the project's version.
SONAME = "libstrata.so.0"


def candidates() -> List[str]:
    """The paths (or bare SONAME) tried, in order, without $STRATA_LIB."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "_libs", SONAME)]
    # <prefix>/lib/python3/dist-packages/strata -> <prefix>/lib
    parts = here.split(os.sep)
    if len(parts) >= 4 and parts[-2] in ("dist-packages", "site-packages"):
        out.append(os.path.join(os.sep.join(parts[:-3]), SONAME))
    out.append(SONAME)
    return out


def load_library() -> ctypes.CDLL:
    """Loads libstrata, or raises ImportError naming what was tried."""
    env = os.environ.get("STRATA_LIB")
    if env:
        try:
            return ctypes.CDLL(env)
        except OSError as e:
            raise ImportError(
                f"strata: cannot load libstrata from $STRATA_LIB={env!r}: {e}"
            ) from e
    tried: List[Tuple[str, str]] = []
    for cand in candidates():
        if os.sep in cand and not os.path.exists(cand):
            tried.append((cand, "no such file"))
            continue
        try:
            return ctypes.CDLL(cand)
        except OSError as e:
            tried.append((cand if os.sep in cand else
                          f"{cand} on the loader's search path", str(e)))
    lines = "\n".join(f"  {where}: {why}" for where, why in tried)
    raise ImportError(
        f"strata: cannot find libstrata ({SONAME}). Tried:\n{lines}\n"
        "Install the 'strata' Debian package (or `cmake --install` strata "
        "into a prefix on the loader's path), install a strata wheel that "
        "bundles the library, or set STRATA_LIB to the library's path.")

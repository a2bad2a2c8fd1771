#!/usr/bin/env bash
# The Python package as a user installs it (docs/deploy.md):
# 1. the wheel (python/pyproject.toml, libstrata bundled as `make package`
#    builds it) is py3-none-<platform> and holds the library and py.typed;
# 2. installed into a fresh venv it imports from an unrelated directory with
#    no environment variable, finding its own copy of the library;
# 3. `pip install ./python` (no bundled library) into another fresh venv,
#    on a machine without a system libstrata, fails to import with an
#    ImportError naming each place it looked, and imports with STRATA_LIB;
# 4. python/examples/torch_ddp.py runs under `strata run` from the unrelated
#    directory with the wheel's venv (torch from Debian's python3-torch via
#    --system-site-packages; skipped (77) without it, after 1-3).
# Usage: pip_test.sh BUILD_DIR SOURCE_DIR. About 30 s (15 s without torch).
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
tmp=$(mktemp -d /tmp/strata-pip-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
lib=$build/runtime/libstrata.so.0
[ -e "$lib" ] || fail "$lib not built"
pip_quiet=(--no-deps --no-index --no-build-isolation -q)
# Debian's interpreter (setuptools, wheel and torch are Debian packages; a
# python3 earlier on PATH, e.g. pyenv's, may have none of them).
py=/usr/bin/python3

# 1. The wheel as `make package` builds it (target strata_wheel).
rm -f "$build"/packages/strata-*.whl
cmake --build "$build" --target strata_wheel > "$tmp/wheel.log" 2>&1 \
  || { cat "$tmp/wheel.log"; fail "building the wheel (target strata_wheel)"; }
whl=$(ls "$build"/packages/strata-*.whl)
cp -r "$src/python" "$tmp/src"  # for pip install ./python (3.)
case "$(basename "$whl")" in
  strata-*-py3-none-linux_*.whl) ;;
  *) fail "wheel tag: $(basename "$whl") (expected py3-none-linux_<arch>)" ;;
esac
"$py" -m zipfile -l "$whl" > "$tmp/wheel.list"
grep -q 'strata/_libs/libstrata.so.0' "$tmp/wheel.list" || fail "no libstrata.so.0 in the wheel"
grep -q 'strata/py.typed' "$tmp/wheel.list" || fail "no py.typed in the wheel"
echo "wheel: $(basename "$whl") $(du -h "$whl" | cut -f1)"

# 2. Fresh venv, unrelated directory, no environment.
"$py" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/pip" install "${pip_quiet[@]}" "$whl" > "$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log"; fail "pip install the wheel"; }
mkdir "$tmp/elsewhere"
clean_env=(env -i "PATH=/usr/bin:/bin" "HOME=$tmp")
got=$(cd "$tmp/elsewhere" && "${clean_env[@]}" "$tmp/venv/bin/python" -c \
  'import strata, strata._library as l; print(strata.__version__, strata.__file__, l.load_library()._name)')
echo "import from the wheel: $got"
case "$got" in
  "$(sed -n 's/^__version__: str = "\(.*\)"/\1/p' "$src/python/strata/_version.py") $tmp/venv/"*"/strata/__init__.py $tmp/venv/"*/strata/_libs/libstrata.so.0) ;;
  *) fail "imported the wrong package or library: $got" ;;
esac

# 3. pip install ./python: pure package, the system's library or STRATA_LIB.
if ldconfig -p | grep -q 'libstrata.so.0 '; then
  echo "note: a system libstrata.so.0 is installed; skipping the missing-library check"
else
  # --system-site-packages: Debian's wheel package builds offline
  # (--no-build-isolation); the system has no strata to import.
  "$py" -m venv --system-site-packages "$tmp/venv2"
  "$tmp/venv2/bin/pip" install "${pip_quiet[@]}" "$tmp/src" > "$tmp/install2.log" 2>&1 \
    || { cat "$tmp/install2.log"; fail "pip install ./python"; }
  if (cd "$tmp/elsewhere" && "${clean_env[@]}" "$tmp/venv2/bin/python" -c 'import strata') \
    > "$tmp/noimport.log" 2>&1; then
    fail "import strata succeeded without any libstrata"
  fi
  grep -q "ImportError: strata: cannot find libstrata (libstrata.so.0). Tried:" "$tmp/noimport.log" \
    && grep -q "$tmp/venv2/.*/strata/_libs/libstrata.so.0: no such file" "$tmp/noimport.log" \
    && grep -q "libstrata.so.0 on the loader's search path" "$tmp/noimport.log" \
    || { cat "$tmp/noimport.log"; fail "the ImportError does not name what was looked for"; }
  (cd "$tmp/elsewhere" && "${clean_env[@]}" STRATA_LIB=/nonexistent/libstrata.so \
    "$tmp/venv2/bin/python" -c 'import strata') > "$tmp/badenv.log" 2>&1 \
    && fail "import with a wrong STRATA_LIB succeeded"
  grep -q "from \$STRATA_LIB='/nonexistent/libstrata.so'" "$tmp/badenv.log" \
    || { cat "$tmp/badenv.log"; fail "the ImportError does not name STRATA_LIB"; }
  (cd "$tmp/elsewhere" && "${clean_env[@]}" STRATA_LIB=$lib "$tmp/venv2/bin/python" \
    -c 'import strata') || fail "import with STRATA_LIB"
  echo "pip install ./python: ImportError names what it tried; STRATA_LIB works"
fi

# 4. The torch DDP example under strata run, from the unrelated directory.
if ! "$tmp/venv/bin/python" -c 'import torch.distributed' > /dev/null 2>&1; then
  echo "SKIP: torch is not importable in the venv (python3-torch not installed)"
  exit 77
fi
(cd "$tmp/elsewhere" && "${clean_env[@]}" "$build/cli/strata" run --nodes 2 \
  --ranks-per-node 1 --ckpt "file://$tmp/ckpt" -- "$tmp/venv/bin/python" \
  "$src/python/examples/torch_ddp.py" --steps 10 --ckpt-every 5) > "$tmp/ddp.out" 2>&1 \
  || { cat "$tmp/ddp.out"; fail "torch_ddp.py under strata run"; }
grep -Eq 'step=10 loss=[0-9.]+' "$tmp/ddp.out" || { cat "$tmp/ddp.out"; fail "no step=10 loss"; }
echo "torch_ddp.py: $(grep -Eo 'step=10 loss=[0-9.]+' "$tmp/ddp.out" | head -1)"
echo PASS

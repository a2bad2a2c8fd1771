# Sourced by the tests that need torch 2.x: sets PY to the venv's python
# (deploy/python-venv.sh, made here when the build did not), or exits 77
# (ctest's SKIP_RETURN_CODE) saying why when PyPI could not be reached.
# Needs $build and $src.
build=$(cd "$build" && pwd)
src=$(cd "$src" && pwd)
venv=$build/venv
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.strata-torch" ]; then
  "$src/deploy/python-venv.sh" "$venv" >&2 || { echo "deploy/python-venv.sh failed"; exit 1; }
fi
if [ -f "$venv/.strata-torch-unavailable" ]; then
  echo "SKIP: $(cat "$venv/.strata-torch-unavailable")"
  exit 77
fi
PY=$venv/bin/python
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
export STRATA_LIB="$build/runtime/libstrata.so"
# As an activated venv: `python3` (torchrun form) and py-spy are the venv's.
export PATH="$venv/bin:$build/cli:$build/runtime:$PATH"

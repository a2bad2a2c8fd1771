#!/bin/sh
# A hung Python rank's diagnosis shows its Python stack next to the native
# one: a torch DDP job (ddp_monitor.py) on 2 simulated nodes whose rank 1
# blocks in hung_in_python() at step 8; the hang must be found and its
# diagnosis in the coordinator's log carry "python: hung_in_python
# (ddp_monitor.py:..." for rank 1 (py-spy, from
# the venv, found on the rank's PATH). Usage: torch_hang_test.sh BUILD SRC.
set -eu
build=$1
src=$2
. "$src/tests/integration/python/torch_env.sh"
dir=$(mktemp -d /tmp/strata-torch-hang-XXXXXX)
trap 'rm -rf "$dir"' EXIT
# The venv's bin first on the ranks' PATH, as an activated venv has it.
"$build/cli/strata" run --nodes 2 --ranks-per-node 1 --max-restarts 0 \
  --fault hang_floor_s=2 --state-dir "$dir/state" \
  --env "PATH=$(dirname "$PY"):$PATH" --env "PYTHONPATH=$PYTHONPATH" \
  --env "STRATA_LIB=$STRATA_LIB" -- \
  "$PY" "$src/tests/integration/python/ddp_monitor.py" 200 --hang-at 8 \
  > "$dir/out" 2>&1 && { echo "the hung job succeeded"; cat "$dir/out"; exit 1; }
# torch's collectives are not strata's: the hang is found by step times
# ("no group is inside a collective"); the stacks show where each rank is.
grep -q "attempt 0: hang: " "$dir/out" || { echo "no hang found"; cat "$dir/out"; exit 1; }
if ! grep -q "python: hung_in_python (ddp_monitor.py:" "$dir/state/coordinator.log"; then
  echo "no Python stack in the hang diagnosis"; cat "$dir/out"
  grep -i "stack" "$dir/state/coordinator.log" | tail -5
  exit 1
fi
grep -o "python: hung_in_python[^|]*|[^|]*" "$dir/state/coordinator.log" | head -1

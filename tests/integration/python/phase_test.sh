#!/bin/sh
# Work outside the step loop is not a hang (docs/fault.md "Phases"): a
# 2-node job whose ranks evaluate for 6 s between steps of 50 ms, with the
# default adaptive hang deadline (3 s floor). Inside `rt.phase("eval")` the
# job completes on its first attempt with no hang found; the same evaluation
# without the phase is found as a hang. Usage: phase_test.sh BUILD SRC.
set -eu
build=$1
src=$2
dir=$(mktemp -d /tmp/strata-phase-XXXXXX)
trap 'rm -rf "$dir"' EXIT
run() {
  "$build/cli/strata" run --nodes 2 --ranks-per-node 1 --max-restarts 0 \
    --state-dir "$dir/state-$1" \
    --env "PYTHONPATH=$src/python" --env "STRATA_LIB=$build/runtime/libstrata.so" -- \
    /usr/bin/python3 "$src/tests/integration/python/phase_rank.py" 20 6 $2 \
    > "$dir/out-$1" 2>&1
}
run phase "" || { echo "the job with an eval phase failed"; cat "$dir/out-phase"; exit 1; }
if grep -q "hang" "$dir/out-phase" "$dir/state-phase/coordinator.log"; then
  echo "a hang was found in a job that only evaluated inside a phase"
  grep "hang" "$dir/out-phase" "$dir/state-phase/coordinator.log"; exit 1
fi
grep -q "rank 1 done at step 40" "$dir/out-phase" || { cat "$dir/out-phase"; exit 1; }
run nophase --no-phase && { echo "a 6 s stall outside a phase was not found"; cat "$dir/out-nophase"; exit 1; }
grep -q "attempt 0: hang: " "$dir/out-nophase" || { echo "no hang reported"; cat "$dir/out-nophase"; exit 1; }
echo "eval inside a phase: no hang; outside: $(grep -o 'attempt 0: hang: [^;]*' "$dir/out-nophase" | head -1)"

#!/bin/sh
# python/examples/torch_ddp.py (DDP over gloo, checkpoints through
# the strata Python package) under `strata run` on 2 nodes. Rank 1 of the
# first attempt dies at step 12; the job restarts, resumes from the latest
# committed checkpoint (step 10, or 5) and must end with exactly the loss of an uninterrupted run.
# Usage: torch_ddp_test.sh BUILD_DIR SOURCE_DIR. Exit 77 (skip) without torch.
set -eu
build=$1
src=$2
if ! /usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1; then
  echo "SKIP: python3-torch is not installed"
  exit 77
fi
dir=$(mktemp -d /tmp/strata-ddp-test-XXXXXX)
trap 'rm -rf "$dir"' EXIT
run() {  # $1 = checkpoint dir, rest = strata run flags
  ckpt=$1
  shift
  STRATA_LIB=$build/runtime/libstrata.so "$build/cli/strata" run --nodes 2 \
    --ckpt "file://$ckpt" "$@" -- /usr/bin/python3 \
    "$src/python/examples/torch_ddp.py" --steps 20 --ckpt-every 5
}
run "$dir/a" > "$dir/full.out" 2>&1 || { cat "$dir/full.out"; exit 1; }
run "$dir/b" --max-restarts 1 --env STRATA_EXAMPLE_CRASH_AT=12 \
  > "$dir/crash.out" 2>&1 || { cat "$dir/crash.out"; exit 1; }
grep -q "simulated crash at step 12" "$dir/crash.out" || { echo "no crash"; cat "$dir/crash.out"; exit 1; }
# The step-10 checkpoint may still be persisting when the crash comes; then
# the step-5 one is the latest committed.
grep -Eq "resumed from step (5|10) " "$dir/crash.out" || { echo "no resume"; cat "$dir/crash.out"; exit 1; }
grep -q "SUCCEEDED after 1 restart" "$dir/crash.out" || { cat "$dir/crash.out"; exit 1; }
a=$(grep -o 'step=20 loss=[0-9.]*' "$dir/full.out")
b=$(grep -o 'step=20 loss=[0-9.]*' "$dir/crash.out")
echo "uninterrupted: $a"
echo "resumed:       $b"
[ -n "$a" ] && [ "$a" = "$b" ]

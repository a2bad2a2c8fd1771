#!/bin/sh
# python/examples/torch_fsdp2.py (FSDP2, strata's DCP writer with
# async_save) under `strata run` in torchrun's form on 2 simulated nodes x 1:
# rank 1 of the first attempt dies at step 12; the job restarts, resumes
# from the newest committed step and must print the same losses as an
# uninterrupted run from there on. Then the same checkpoint resumes on 3
# ranks. Usage: fsdp2_restart_test.sh BUILD_DIR SOURCE_DIR.
set -eu
build=$1
src=$2
. "$src/tests/integration/python/torch_env.sh"
dir=$(mktemp -d /tmp/strata-fsdp2-restart-XXXXXX)
trap 'rm -rf "$dir"' EXIT
run() {  # $1 = checkpoint dir, $2 = output, rest = strata run flags
  ckpt=$1
  out=$2
  shift 2
  "$build/cli/strata" run "$@" "$src/python/examples/torch_fsdp2.py" \
    --steps 20 --ckpt-every 5 --ckpt "file://$ckpt" > "$out" 2>&1 \
    || { cat "$out"; exit 1; }
}
run "$dir/a" "$dir/full.out" --nnodes 2 --nproc-per-node 1
run "$dir/b" "$dir/crash.out" --nnodes 2 --nproc_per_node 1 --max-restarts 1 \
  --env STRATA_EXAMPLE_CRASH_AT=12
grep -q "simulated crash at step 12" "$dir/crash.out" || { echo "no crash"; cat "$dir/crash.out"; exit 1; }
from=$(grep -o "resumed from step [0-9]*" "$dir/crash.out" | grep -o "[0-9]*$")
case "$from" in 5|10) ;; *) echo "no resume from step 5 or 10"; cat "$dir/crash.out"; exit 1 ;; esac
grep -q "SUCCEEDED after 1 restart" "$dir/crash.out" || { cat "$dir/crash.out"; exit 1; }
# Every step after the resume point: the same loss as the uninterrupted run.
n=0
for s in $(seq $((from + 1)) 20); do
  a=$(grep -o "\] step=$s loss=[0-9.]*" "$dir/full.out" | head -1)
  b=$(grep -o "\] step=$s loss=[0-9.]*" "$dir/crash.out" | tail -1)
  [ -n "$a" ] && [ "$a" = "$b" ] || { echo "step $s: '$a' vs '$b'"; exit 1; }
  n=$((n + 1))
done
echo "resumed from step $from: $n steps with the uninterrupted run's losses"
# The 2-rank checkpoint resumes on 3 ranks (different world size).
"$build/cli/strata" run --nproc-per-node 3 "$src/python/examples/torch_fsdp2.py" \
  --steps 22 --ckpt-every 50 --ckpt "file://$dir/a" > "$dir/three.out" 2>&1 \
  || { cat "$dir/three.out"; exit 1; }
grep -q "resumed from step 20 on 3 ranks" "$dir/three.out" || { cat "$dir/three.out"; exit 1; }
grep -q "\] step=22 loss=" "$dir/three.out" || { cat "$dir/three.out"; exit 1; }

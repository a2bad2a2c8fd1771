#!/bin/sh
# FSDP2 state saved through DCP on strata's engine by 4 ranks (2 simulated
# nodes x 2) loads on 2 and on 3 ranks with equal values
# (fsdp_reshard.py). Usage: fsdp_reshard_test.sh BUILD_DIR SOURCE_DIR.
set -eu
build=$1
src=$2
. "$src/tests/integration/python/torch_env.sh"
dir=$(mktemp -d /tmp/strata-fsdp-reshard-XXXXXX)
trap 'rm -rf "$dir"' EXIT
# file:// only: dcp_test.py round-trips rocksdb:// (the same engine code path
# for boxes); each strata run here costs ~10-40 s of torch start-up.
for scheme in file; do
  uri=$scheme://$dir/ck-$scheme
  run() {  # $1 = nodes, $2 = ranks per node, $3 = save|load
    "$build/cli/strata" run --nodes "$1" --ranks-per-node "$2" -- "$PY" \
      "$src/tests/integration/python/fsdp_reshard.py" "$3" "$uri" "$dir/ref-$scheme.pt" \
      > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
  }
  run 2 2 save
  grep -q "saved step 2 from 4 ranks" "$dir/out" || { cat "$dir/out"; exit 1; }
  "$build/cli/strata" ckpt verify "$uri" --step 2 > "$dir/verify" 2>&1 || { cat "$dir/verify"; exit 1; }
  run 1 2 load
  grep -q "equal on 2 ranks" "$dir/out" || { cat "$dir/out"; exit 1; }
  run 1 3 load
  grep -q "equal on 3 ranks" "$dir/out" || { cat "$dir/out"; exit 1; }
  echo "$scheme: 4 -> 2 and 4 -> 3 ranks: equal"
done

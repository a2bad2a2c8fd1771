#!/usr/bin/env bash
# Every checkpoint storage path under injected EIO and ENOSPC (the failio
# LD_PRELOAD shim, tests/fault/failio/failio.h), for file:// and rocksdb://:
# chunk data, rank index, manifest, LATEST, the catalog, and the rank's
# RocksDB instance (at its first write and after 1.5 MB of data), each with
# failing writes and with failing fsyncs. ckpt_fault_driver checks each case
# (a clear Status, the previous step intact, a later save succeeds, the
# catalog matches the manifests).
#   ckpt_failio_test.sh LIBFAILIO DRIVER
set -u
LIB=$1
DRIVER=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
pass=0
fail=0
run() {  # run SCHEME PATH_SUFFIX EXPECT ERRNO OPS [AFTER_BYTES]
  local scheme=$1 suffix=$2 expect=$3 err=$4 ops=$5 after=${6:-0}
  local dir="$D/c$((pass + fail))"
  mkdir -p "$dir"
  if env LD_PRELOAD="$LIB" STRATA_FAILIO_PATH="$dir/ckpt/$suffix" \
      STRATA_FAILIO_ERRNO="$err" STRATA_FAILIO_OPS="$ops" \
      STRATA_FAILIO_AFTER_BYTES="$after" STRATA_FAILIO_TRIGGER="$dir/trigger" \
      STRATA_FAILIO_QUIET=1 "$DRIVER" "$scheme$dir/ckpt" "$dir/trigger" \
      "$expect" >"$dir/out" 2>&1; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $scheme $suffix $err $ops after=$after:"
    grep -E "FAIL|Abort|Assert" "$dir/out" | head -5
  fi
}
for err in EIO ENOSPC; do
  for ops in write sync; do
    run file:// step-000000000002/rank-00000.data rank-00000.data $err $ops
    run file:// step-000000000002/rank-00000.index rank-00000.index $err $ops
    run file:// step-000000000002/manifest.pb manifest.pb $err $ops
    run file:// LATEST LATEST $err $ops
    run file:// catalog.rocksdb catalog.rocksdb $err $ops
    run rocksdb:// rank-00000.rocksdb rank-00000.rocksdb $err $ops
    # Mid-stream: the byte allowance counts writes only.
    [[ $ops == write ]] &&
      run rocksdb:// rank-00000.rocksdb rank-00000.rocksdb $err $ops 1500000
    run rocksdb:// catalog.rocksdb catalog.rocksdb $err $ops
  done
done
echo "checkpoint storage faults: $pass of $((pass + fail)) cases pass"
[[ $fail -eq 0 ]]

#!/usr/bin/env bash
# Resume falls back from a damaged memory tier to the durable one and never
# trains from a wrong state (docs/checkpoint.md "Memory tier"). One rank,
# no network involved (mem:///DIR without peers), so no simulated hosts.
#
#   mem_fallback_test.sh BUILD_DIR SOURCE_DIR        (ctest: mem_fallback_test)
#
# 1. strata-train --model tiny, 10 steps, memory checkpoint every step,
#    durable every 5: both tiers hold step 10.
# 2. A byte of the memory tier's step-10 data is flipped: --resume picks the
#    memory tier (newest, memory first when equal), its load fails the
#    checksum, the run says so and loads durable step 10; losses of steps
#    11-14 equal an uninterrupted run's.
# 3. The same damage with no durable tier: the run fails (exit 1, DataLoss,
#    "not starting from a wrong state") instead of training from step 0.
# 4. An intact memory tier newer than the durable one is preferred.
set -uo pipefail
TEST_NAME=mem_fallback_test
BUILD=${1:?usage: mem_fallback_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: mem_fallback_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
need_bins runtime/strata-train

tmp=$(mktemp -d /tmp/strata-mem-fallback-XXXXXX)
mem=$(mktemp -d /dev/shm/strata-mem-fallback-XXXXXX)
# shellcheck disable=SC2317
cleanup() {
  rm -rf "$mem"
  if [ "$failures" -eq 0 ]; then rm -rf "$tmp"; else echo "logs kept in $tmp"; fi
}
trap cleanup EXIT
unset STRATA_MEM_PEERS STRATA_MEM_NODE STRATA_MEM_DIR
args=(--model tiny --global-batch 4 --micro-batch 1)
reference_run "$tmp/reference.out" "${args[@]}" --steps 14

train() {  # OUT ARGS...
  local out=$1
  shift
  env -u STRATA_STORE -u RANK -u WORLD_SIZE timeout -k 5 120 "$TRAIN" "${args[@]}" \
    --mem-ckpt "mem://$mem/job-1" --mem-ckpt-every 1 "$@" > "$out" 2>&1
}
flip() {  # FILE: flips one byte in the middle
  local size
  size=$(stat -c %s "$1")
  printf '\x5a' | dd of="$1" bs=1 seek=$((size / 2)) conv=notrunc status=none
}

train "$tmp/first.out" --steps 10 --ckpt "file://$tmp/ckpt" --ckpt-every 5 ||
  die "first run failed: $(tail -n 5 "$tmp/first.out")"
data="$mem/job-1/step-000000000010/rank-00000.data"
[ -f "$data" ] || die "no memory-tier data at $data"
flip "$data"

train "$tmp/resume.out" --steps 14 --ckpt "file://$tmp/ckpt" --ckpt-every 5 --resume
rc=$?
[ "$rc" -eq 0 ] || fail "resume over a damaged memory tier exited $rc: $(tail -n 5 "$tmp/resume.out")"
grep -q "memory tier step 10 did not load on every rank (this rank: .*checksum mismatch)" \
  "$tmp/resume.out" || fail "the checksum failure of the memory tier was not reported"
grep -q "falling back to the durable tier (step 10 of file://$tmp/ckpt)" "$tmp/resume.out" ||
  fail "no fallback to durable step 10 reported"
grep -q "resume: step 10 from the durable tier" "$tmp/resume.out" ||
  fail "did not resume from durable step 10"
compare_losses "$tmp/reference.out" "$tmp/resume.out" "after the fallback" 11 14

# No durable tier: refuse rather than start over.
rm -rf "$mem/job-1"
train "$tmp/first2.out" --steps 10 || die "memory-only run failed: $(tail -n 5 "$tmp/first2.out")"
flip "$data"
train "$tmp/refuse.out" --steps 14 --resume
rc=$?
[ "$rc" -eq 1 ] || fail "damaged memory tier without durable: exit $rc, want 1"
grep -q "not starting from a wrong state" "$tmp/refuse.out" ||
  fail "no refusal message: $(tail -n 3 "$tmp/refuse.out")"
grep -q "^step=1 loss=" "$tmp/refuse.out" && fail "trained from step 0 after a failed resume"

# Intact memory tier, newer than the durable one: preferred.
rm -rf "$mem/job-1" "$tmp/ckpt"
train "$tmp/first3.out" --steps 8 --ckpt "file://$tmp/ckpt" --ckpt-every 5 ||
  die "third run failed: $(tail -n 5 "$tmp/first3.out")"
train "$tmp/newer.out" --steps 12 --ckpt "file://$tmp/ckpt" --ckpt-every 5 --resume ||
  fail "resume from the memory tier failed: $(tail -n 5 "$tmp/newer.out")"
grep -q "resume: step 8 from the memory tier" "$tmp/newer.out" ||
  fail "the newer memory step 8 was not preferred over durable step 5"
compare_losses "$tmp/reference.out" "$tmp/newer.out" "from memory" 9 12

if [ "$failures" -gt 0 ]; then
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

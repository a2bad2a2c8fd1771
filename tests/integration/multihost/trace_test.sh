#!/usr/bin/env bash
# `strata trace` of a running job across two simulated hosts
# (tests/simhost/simhost.sh) whose wall clocks disagree:
#
#   trace_test.sh BUILD_DIR SOURCE_DIR          (ctest: multihost_trace_test)
#
# 1. Coordinator and a worker in h0; a worker in h1 whose processes (the
#    worker and the rank it starts) read a wall clock SKEW_MS ahead
#    (clock_skew.cc, LD_PRELOAD). strata-train --model tiny, dp=2, one rank
#    per host: every step ends in an all-reduce over TCP between the hosts.
# 2. Once the job passed step 40, `strata trace --last 30` must write a
#    trace that follows the JSON trace event format (check_trace.py), with
#    both ranks, step sections, and all-reduce spans of both ranks whose
#    time ranges overlap (they must: an all-reduce ends on no rank before
#    every rank entered it) within the error bounds `strata trace` states
#    for the two clocks, for at least 99% of the pairs (small all-reduces
#    last ~50 us, less than the bounds, so they may miss by that much);
#    the offset it reports for h1 must be -SKEW_MS within 10 ms.
# 3. The same with --raw-clocks (timestamps as taken): at most 10% of the
#    pairs come that close, so the alignment is what makes them line up.
# 4. Bad input: an unknown job, a malformed --steps and a non-.json output
#    exit 2 with a message; a trace of an ended job exits 2 too.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=multihost_trace_test
BUILD=${1:?usage: trace_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: trace_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

SKEW_LIB=tests/integration/multihost/libstrata_test_clock_skew.so
need_bins runtime/strata-train cli/strata coordinator/strata-coordinator \
  worker/strata-worker "$SKEW_LIB"
STRATA="$BUILD/cli/strata"
SKEW_MS=300
PORT=7077

multihost_begin 2 "1gbit" mh-trace

simhost_coordinator "$BUILD" "$tmp" "$PORT"
endpoint=$SIMHOST_ENDPOINT
st() { simhost_exec 0 timeout -k 5 60 "$STRATA" "$@" --coordinator "$endpoint"; }
simhost_worker "$BUILD" "$tmp" 0
# h1's worker (and the ranks it starts) see a clock SKEW_MS ahead.
LD_PRELOAD="$BUILD/$SKEW_LIB" STRATA_TEST_CLOCK_SKEW_MS=$SKEW_MS simhost_worker "$BUILD" "$tmp" 1
skewed=$(simhost_exec 1 env LD_PRELOAD="$BUILD/$SKEW_LIB" STRATA_TEST_CLOCK_SKEW_MS=$SKEW_MS date +%s%N)
[ $(((skewed - $(date +%s%N)) / 1000000)) -ge $((SKEW_MS - 50)) ] ||
  die "the clock shim did not skew h1's clock"
simhost_wait_workers "$BUILD" 2 || die "2 workers did not register within 30 s; logs in $tmp"

cat > "$tmp/job.yaml" << YAML
name: multihost-trace
global_batch: 8
launch:
  command: [$TRAIN, --model, tiny, --global-batch, "8", --micro-batch, "2",
            --steps, "100000"]
  nodes: 2
  ranks_per_node: 1
  worker_wait_s: 30
YAML
job=$(st submit "$tmp/job.yaml" 2> "$tmp/submit.err" | awk '{print $NF}' | grep -o 'job-[0-9]*' | head -n 1)
[ -n "$job" ] || die "submit failed: $(cat "$tmp/submit.err")"
reached=0
for _ in $(seq 1 240); do  # at most ~120 s
  if st logs "$job" 2> /dev/null | grep -q "step=40 loss="; then reached=1; break; fi
  sleep 0.5
done
[ "$reached" -eq 1 ] || die "$job did not reach step 40 within 120 s: $(st status "$job" 2>&1 | tail -n 5)"

check() {  # check FILE TOL_US: prints its RESULT fields as shell assignments
  /usr/bin/python3 "$SRC/tests/integration/multihost/check_trace.py" "$1" "$2" |
    sed -n 's/^RESULT //p'
}

st trace "$job" -o "$tmp/aligned.json" --last 30 > "$tmp/aligned.out" 2>&1 ||
  fail "strata trace exited $?: $(cat "$tmp/aligned.out")"
say "$(cat "$tmp/aligned.out")"
# Both nodes' stated error bounds (ms) make the tolerance (us).
tol=$(grep -o '(+-[0-9.]*)' "$tmp/aligned.out" | tr -d '()+-' |
  awk '{ s += $1 } END { printf "%d", s * 1000 + 1 }')
aligned=$(check "$tmp/aligned.json" "$tol")
[ -n "$aligned" ] || fail "aligned trace rejected: $(/usr/bin/python3 "$SRC/tests/integration/multihost/check_trace.py" "$tmp/aligned.json")"
say "aligned (tolerance $tol us): $aligned"
eval "$aligned"
[ "${ranks:-0}" -eq 2 ] || fail "aligned trace has ${ranks:-0} ranks, want 2"
[ "${sections:-0}" -ge 30 ] || fail "aligned trace has ${sections:-0} step sections, want >= 30"
[ "${pairs:-0}" -ge 10 ] || fail "aligned trace has ${pairs:-0} all-reduce pairs, want >= 10"
[ $((near * 100)) -ge $((pairs * 99)) ] ||
  fail "aligned: $near of $pairs all-reduce pairs overlap within $tol us, want >= 99%"
offset=$(sed -n "s/.*${SIMHOST_NAME[1]} \([-+][0-9.]*\) ms.*/\1/p" "$tmp/aligned.out")
awk -v o="${offset:-x}" -v s="$SKEW_MS" 'BEGIN { exit !(o != "x" && o + s < 10 && o + s > -10) }' ||
  fail "offset of ${SIMHOST_NAME[1]} is '${offset}' ms, want -$SKEW_MS within 10"

st trace "$job" -o "$tmp/raw.json" --last 30 --raw-clocks > "$tmp/raw.out" 2>&1 ||
  fail "strata trace --raw-clocks exited $?: $(cat "$tmp/raw.out")"
raw=$(check "$tmp/raw.json" "$tol")
say "raw clocks: $raw"
eval "$raw"
[ "${pairs:-0}" -ge 10 ] || fail "raw trace has ${pairs:-0} all-reduce pairs, want >= 10"
[ $((near * 10)) -le "$pairs" ] ||
  fail "raw clocks: $near of $pairs pairs overlap within $tol us, want <= 10% (is the skew applied?)"

expect_exit() {  # expect_exit CODE LABEL ARGS...: strata trace ARGS exits CODE
  local want=$1 label=$2 out
  shift 2
  out=$(st trace "$@" 2>&1)
  local got=$?
  [ "$got" -eq "$want" ] || fail "$label: exit $got, want $want ($out)"
  [ -n "$out" ] || fail "$label: no message"
}
expect_exit 2 "unknown job" job-999 -o "$tmp/x.json"
expect_exit 2 "bad --steps" "$job" -o "$tmp/x.json" --steps 5:x
expect_exit 2 "bad output" "$job" -o "$tmp/x.svg"
st cancel "$job" > /dev/null 2>&1 || fail "cancel failed"
for _ in $(seq 1 40); do
  st status "$job" 2> /dev/null | grep -q CANCELLED && break
  sleep 0.25
done
expect_exit 2 "ended job" "$job" -o "$tmp/x.json"

if [ "$failures" -gt 0 ]; then
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

#!/usr/bin/env bash
# Slow-link detection in a running job across three simulated hosts
# (tests/simhost/simhost.sh), every host's link at 1 Gbit/s:
#
#   slow_link_test.sh BUILD_DIR SOURCE_DIR      (ctest: multihost_slow_link_test)
#
# 1. Coordinator and a worker in h0, a worker in h1 and h2; strata-train
#    --model small with dp=3, one rank per host (the gradient all-reduce
#    is a TCP ring h0 -> h1 -> h2 -> h0).
# 2. Until step SLOW_AT no slow_link event may appear (clean links).
# 3. At step SLOW_AT h2's link is cut to 250 Mbit/s (1/4 of the others,
#    tc on the host's link). Within 60 s `strata events --format json`
#    must name the slow pairs, each including h2, with the evidence
#    naming h2 as the node all slow pairs share; `strata diagnose` shows
#    them as SLOW in its link matrix. Nothing else is flagged.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=multihost_slow_link_test
BUILD=${1:?usage: slow_link_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: slow_link_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
SLOW_AT=12
DEADLINE_S=60
PORT=7077

multihost_begin 3 "1gbit" mh-slowlink

simhost_daemons "$BUILD" "$tmp" "$PORT" || die "3 workers did not register within 30 s; logs in $tmp"
endpoint=$SIMHOST_ENDPOINT
strata_h0() { simhost_exec 0 timeout 10 "$STRATA" "$@" --coordinator "$endpoint"; }

cat > "$tmp/job.yaml" << YAML
name: multihost-slow-link
global_batch: 3
constraints:
  tp: 1
  pp: 1
launch:
  command: [$TRAIN, --model, small, --global-batch, "3", --micro-batch, "1",
            --steps, "400"]
  nodes: 3
  ranks_per_node: 1
  worker_wait_s: 30
YAML

simhost_exec 0 timeout -k 5 500 "$STRATA" submit --coordinator "$endpoint" --wait --follow \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1 &
submit_pid=$!
job=""
for _ in $(seq 1 600); do  # at most ~60 s to the first steps
  job=$(sed -n 's/.*\[strata\] \(job-[0-9]*\).*/\1/p' "$tmp/job.out" | head -n 1)
  [ -n "$job" ] && grep -q "step=$SLOW_AT loss=" "$tmp/job.out" && break
  kill -0 "$submit_pid" 2> /dev/null || break
  sleep 0.1
done
[ -n "$job" ] || job=job-1
grep -q "step=$SLOW_AT loss=" "$tmp/job.out" ||
  die "$job never reached step $SLOW_AT: $(tail -n 5 "$tmp/job.out")"
check_rank_sockets 2 "before the slowdown"
slow_links() { strata_h0 events "$job" --format json 2> /dev/null | grep '"kind":"slow_link"' || true; }
early=$(slow_links)
[ -z "$early" ] || fail "slow_link events on clean 1 Gbit/s links: $early"

say "step $SLOW_AT: ${SIMHOST_NAME[2]}'s link 1gbit -> 250mbit"
simhost_rate 2 250mbit || die "tc failed"
start=$SECONDS
found=""
first=""
# Both pairs of the ring that cross h2's link (h1 -> h2 and h2 -> h0).
while [ $((SECONDS - start)) -le "$DEADLINE_S" ]; do
  found=$(slow_links)
  [ -n "$found" ] && [ -z "$first" ] && first=$((SECONDS - start))
  [ "$(echo "$found" | grep -c slow_link)" -ge 2 ] && break
  kill -0 "$submit_pid" 2> /dev/null || break
  sleep 1
done
took=$((SECONDS - start))
h2=${SIMHOST_NAME[2]}
if [ -z "$found" ]; then
  fail "no slow_link event within $DEADLINE_S s of the slowdown"
else
  say "first slow pair named $first s after the slowdown, $(echo "$found" | grep -c slow_link) after $took s:"
  echo "$found" | sed 's/^/  /'
  bad=$(echo "$found" | grep -v "\"node\":\"$h2\"" | grep -v "\"peer_node\":\"$h2\"" || true)
  [ -z "$bad" ] || fail "slow_link events without $h2: $bad"
  [ "$(echo "$found" | grep -c slow_link)" -ge 2 ] ||
    fail "only one of the two slow pairs (h1 -> $h2, $h2 -> h0) named within $DEADLINE_S s"
  echo "$found" | grep -q "include $h2" ||
    fail "no event names $h2 as the node every slow pair includes"
fi
strata_h0 diagnose "$job" > "$tmp/diagnose.txt" 2>&1
sed -n '/^links/,$p' "$tmp/diagnose.txt"
grep -q SLOW "$tmp/diagnose.txt" || fail "strata diagnose shows no SLOW link"
stragglers=$(strata_h0 events "$job" --format json 2> /dev/null | grep '"kind":"straggler"' || true)
[ -z "$stragglers" ] || say "note: straggler events during the run: $stragglers"

strata_h0 cancel "$job" > /dev/null 2>&1
wait "$submit_pid" 2> /dev/null
if [ "$failures" -gt 0 ]; then
  echo "--- job output"; tail -n 20 "$tmp/job.out"
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

#!/usr/bin/env bash
# No false alarms on a healthy job: 2,000 clean steps of strata-train tiny,
# dp=2 across two simulated hosts (tests/simhost/simhost.sh, 1 Gbit links),
# a checkpoint every 100 steps to file://, with every detector on at its
# defaults (the adaptive hang deadline with its 3 s floor, the straggler,
# slow-link and plan-vs-measured checks). The job must succeed in its first
# attempt and the coordinator must record no finding of any kind.
#
#   clean_run_test.sh BUILD_DIR SOURCE_DIR      (ctest: multihost_clean_run_test)
#
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=multihost_clean_run_test
BUILD=${1:?usage: clean_run_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: clean_run_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
STEPS=${CLEAN_STEPS:-2000}
PORT=7078

multihost_begin 2 "1gbit" mh-clean

simhost_daemons "$BUILD" "$tmp" "$PORT" || die "the daemons did not start"
endpoint=$SIMHOST_ENDPOINT

cat > "$tmp/job.yaml" << YAML
name: clean-run
global_batch: 8
launch:
  command: [$TRAIN, --model, tiny, --global-batch, "8", --micro-batch, "2",
            --steps, "$STEPS", --ckpt-every, "100"]
  nodes: 2
  ranks_per_node: 1
  max_restarts: 0
  worker_wait_s: 30
  checkpoint_uri: file://$tmp/ckpt
YAML

start=$SECONDS
simhost_exec 0 timeout -k 5 500 "$STRATA" submit --coordinator "$endpoint" --wait \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1
rc=$?
wall=$((SECONDS - start))
[ "$rc" -eq 0 ] || fail "the clean job exited $rc, want 0"
job=$(grep -o 'job-[0-9]*' "$tmp/job.out" | head -n 1)
simhost_exec 0 timeout 10 "$STRATA" events --coordinator "$endpoint" "$job" \
  > "$tmp/events" 2>&1 || fail "strata events $job failed: $(cat "$tmp/events")"
# Every detector's finding (docs/fault.md) is logged by the coordinator as
# "JOB attempt N: KIND: ..."; a suspected hang first as "no step progress".
kinds='hang|straggler|slow_link|plan_mismatch|unbalanced_plan'
pattern="attempt [0-9]+: ($kinds): |no step progress for"
findings=$(grep -Ec "$pattern" "$tmp/coordinator.log")
if [ "$findings" -ne 0 ]; then
  fail "$findings false finding(s) in $STEPS clean steps:"
  grep -E "$pattern" "$tmp/coordinator.log" | head -n 10
fi
grep -q "attempt_failed" "$tmp/events" && fail "an attempt of the clean job failed"

if [ "$failures" -gt 0 ]; then
  echo "--- events"; cat "$tmp/events"
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "$STEPS clean steps on 2 simulated hosts in $wall s: 0 findings"

#!/usr/bin/env bash
# A lost node replaced by a hot spare across three simulated hosts
# (tests/simhost/simhost.sh; docs/fault.md "Hot spares"): the coordinator
# and a worker in h0, a worker in h1 and in h2.
#
#   spare_simhost_test.sh BUILD_DIR SOURCE_DIR     (ctest: spare_simhost_test)
#
# 1. A job of 2 nodes x 1 rank with launch.spares: 1 runs on h0 and h1 and
#    reserves h2: `strata status` shows SPARES 1/1 and h2 reserved in the
#    idle pool; the job's detail names the spare.
# 2. Once the job reports step KILL_AT, h1's worker is SIGKILLed. The next
#    attempt must run on h0 and h2 with the same plan (event spare_used
#    naming h1 and h2, no re-plan), resume from the last checkpoint and
#    succeed, every loss equal to a single-process run's.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=spare_simhost_test
BUILD=${1:?usage: spare_simhost_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: spare_simhost_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
STEPS=14
KILL_AT=5
PORT=7078  # inside h0's own network namespace

multihost_begin 3 "" spare

train_args=(--model small --global-batch 4 --micro-batch 1)
reference_run "$tmp/reference.out" "${train_args[@]}" --steps "$STEPS"

simhost_coordinator "$BUILD" "$tmp" "$PORT" --heartbeat-ms 250
endpoint=$SIMHOST_ENDPOINT
for i in 0 1 2; do
  simhost_worker "$BUILD" "$tmp" "$i"
  sleep 0.3  # registry order h0, h1, h2: the job takes h0 and h1
done
simhost_wait_workers "$BUILD" 3 || die "3 workers did not register within 30 s; logs in $tmp"

cat > "$tmp/job.yaml" << YAML
name: spare-simhost
global_batch: 4
launch:
  command: [$TRAIN, --model, small, --global-batch, "4", --micro-batch, "1",
            --steps, "$STEPS", --ckpt-every, "2", --resume]
  nodes: 2
  ranks_per_node: 1
  spares: 1
  max_restarts: 2
  worker_wait_s: 30
  checkpoint_uri: file://$tmp/ckpt
YAML

start=$SECONDS
simhost_exec 0 timeout -k 5 250 "$STRATA" submit --coordinator "$endpoint" --wait --follow \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1 &
submit_pid=$!
killed=0
for _ in $(seq 1 2500); do  # at most ~250 s
  kill -0 "$submit_pid" 2> /dev/null || break
  if [ "$killed" -eq 0 ] && grep -q "step=$KILL_AT loss=" "$tmp/job.out"; then
    simhost_exec 0 "$STRATA" status --coordinator "$endpoint" > "$tmp/status.out" 2>&1
    simhost_exec 0 "$STRATA" status --coordinator "$endpoint" job-1 > "$tmp/status-job.out" 2>&1
    say "step $KILL_AT reached after $((SECONDS - start)) s: SIGKILL the worker on ${SIMHOST_NAME[1]}"
    kill -KILL "${SIMHOST_WORKER_PID[1]}"
    killed=1
  fi
  sleep 0.1
done
wait "$submit_pid"
rc=$?
say "job ended with exit code $rc after $((SECONDS - start)) s"
[ "$killed" -eq 1 ] || fail "the job never reported step $KILL_AT"
[ "$rc" -eq 0 ] || fail "strata submit --wait exited $rc, want 0"

# 1. What status showed while the job ran.
awk '$1 == "job-1" && $6 == "1/1" {ok = 1} END {exit !ok}' "$tmp/status.out" ||
  fail "strata status: no SPARES 1/1 for job-1: $(cat "$tmp/status.out")"
grep -q "1 reserved as spares \[w-h2 for job-1\]" "$tmp/status.out" ||
  fail "strata status: the idle pool does not show w-h2 reserved for job-1"
grep -q "^spares    1 of 1 reserved \[w-h2\]" "$tmp/status-job.out" ||
  fail "strata status job-1: no spares line naming w-h2: $(cat "$tmp/status-job.out")"

# 2. The spare took h1's place, same plan.
grep -q "spare_used: node h1 replaced by spare h2: same plan, tp=1 pp=1 dp=2 on 2 nodes" "$tmp/job.out" ||
  fail "no spare_used event naming h1 and h2 with the same plan"
grep -q "launched: 2 ranks on 2 nodes \[h0, h2\]" "$tmp/job.out" ||
  fail "the next attempt did not run on h0 and h2"
if grep -q ": replanned: " "$tmp/job.out"; then
  fail "the job was re-planned although a spare was idle"
fi
grep -q "step=$STEPS loss=" "$tmp/job.out" || fail "the job never reached step $STEPS"
compare_losses "$tmp/reference.out" "$tmp/job.out" "both attempts"

if [ "$failures" -gt 0 ]; then
  echo "--- job output"; cat "$tmp/job.out"
  echo "--- status"; cat "$tmp/status.out" "$tmp/status-job.out"
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

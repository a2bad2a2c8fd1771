#!/usr/bin/env bash
# A lost node replaced in place on a hot spare (docs/fault.md "Node loss in
# place"). Three simulated hosts (own network namespace, hostname and
# /dev/shm each): the coordinator and worker A in h0, worker B in h1, the
# spare worker C in h2 (registered last, reserved by launch.spares: 1).
#
#   inplace_node_test.sh BUILD_DIR SOURCE_DIR      (ctest: inplace_node_test)
#
# strata-train --model tiny dp=2 on h0 and h1 (one rank each),
# --in-place-restart, a memory checkpoint every step and a durable one every
# DURABLE_EVERY steps, max_restarts 0 (a full restart would fail the job).
# Once rank 0 printed step KILL_AT, h1's worker is SIGKILLed (its rank dies
# with it). The job must:
#  - succeed in its first attempt (no attempt_failed event), with a
#    spare_used event "in place" and an in_place_restart event naming node
#    h1 replaced by spare h2;
#  - keep rank 0's process (same pid) and run rank 1 on h2, which loads the
#    lost rank's state from its peer's memory;
#  - compute at most 10 steps again (rank 0's last step before the restart
#    minus the step it continues from: tiny's ~10 ms steps are shorter than
#    a memory save's replica round trip, so the memory tier's agreed rule
#    skips steps while a save is in flight; the goal of 1 step is measured
#    by strata-bench fault on `small`), and every loss must equal a
#    single-process run's.
# Prints "RECOVERY_S X": the SIGKILL -> the next step line rank 0 writes
# after its "in-place restart" line.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=inplace_node_test
BUILD=${1:?usage: inplace_node_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: inplace_node_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
STEPS=${INPLACE_STEPS:-60}
KILL_AT=${INPLACE_FAULT_AT:-20}
DURABLE_EVERY=10
PORT=7076

multihost_begin 3 "1gbit" inplace-node

train_args=(--model tiny --global-batch 4 --micro-batch 1)
reference_run "$tmp/reference.out" "${train_args[@]}" --steps "$STEPS"

simhost_coordinator "$BUILD" "$tmp" "$PORT" --heartbeat-ms 250
endpoint=$SIMHOST_ENDPOINT
for i in 0 1 2; do
  simhost_worker "$BUILD" "$tmp" "$i" --mem-dir /dev/shm/strata-mem --mem-limit 256MiB
  sleep 0.3  # registry order h0, h1, h2: the job takes h0 and h1
done
simhost_wait_workers "$BUILD" 3 || die "3 workers did not register within 30 s; logs in $tmp"

cat > "$tmp/job.yaml" << YAML
name: inplace-node
global_batch: 4
constraints:
  tp: 1
  pp: 1
launch:
  command: [$TRAIN, --model, tiny, --global-batch, "4", --micro-batch, "1",
            --steps, "$STEPS", --ckpt-every, "$DURABLE_EVERY", --mem-ckpt-every, "1",
            --resume, --in-place-restart]
  nodes: 2
  ranks_per_node: 1
  spares: 1
  max_restarts: 0
  worker_wait_s: 30
  checkpoint_uri: file://$tmp/ckpt
YAML

start=$SECONDS
simhost_exec 0 timeout -k 5 200 "$STRATA" submit --coordinator "$endpoint" --wait \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1 &
submit_pid=$!
killed=0
for _ in $(seq 1 3000); do  # at most ~60 s to the fault
  kill -0 "$submit_pid" 2> /dev/null || break
  s=$(last_step)
  if [ -n "$s" ] && [ "$s" -ge "$KILL_AT" ]; then
    pid0=$(rank_pid 0)
    pid1=$(rank_pid 1)
    t0=$(date +%s.%N)
    kill -KILL "${SIMHOST_WORKER_PID[1]}"
    say "step $s: SIGKILL the worker on ${SIMHOST_NAME[1]} (rank 1: pid $pid1; rank 0: pid $pid0)"
    killed=1
    break
  fi
  sleep 0.02
done
[ "$killed" -eq 1 ] || die "the job never reached step $KILL_AT: $(tail -n 5 "$tmp/job.out")"
recovered=""
for _ in $(seq 1 4000); do  # at most ~80 s
  if [ "$(steps_in_place)" -gt 0 ]; then
    recovered=$(echo "$(date +%s.%N) - $t0" | bc)
    break
  fi
  kill -0 "$submit_pid" 2> /dev/null || break
  sleep 0.02
done
if [ -n "$recovered" ]; then
  say "RECOVERY_S $recovered (node SIGKILL -> next completed step)"
else
  fail "no step completed after the node loss"
fi
after0=$(rank_pid 0)
wait "$submit_pid"
rc=$?
say "job ended with exit code $rc after $((SECONDS - start)) s"
[ "$rc" -eq 0 ] || fail "strata submit --wait exited $rc, want 0 (max_restarts 0: no full restart)"
job=$(grep -o 'job-[0-9]*' "$tmp/job.out" | head -n 1)
simhost_exec 0 timeout 10 "$STRATA" events --coordinator "$endpoint" "$job" \
  > "$tmp/events" 2>&1 || fail "strata events $job failed: $(cat "$tmp/events")"

grep -q "attempt_failed" "$tmp/events" &&
  fail "the attempt was restarted: $(grep attempt_failed "$tmp/events")"
grep -Eq "spare_used +node h1 replaced by spare h2 in place" "$tmp/events" ||
  fail "no spare_used event naming h1 and h2 in place"
ev=$(grep "in_place_restart" "$tmp/events" | head -n 1)
if [ -z "$ev" ]; then
  fail "no in_place_restart event"
else
  say "event: $ev"
  echo "$ev" | grep -q "node h1 (rank(s) 1) replaced in place by spare h2" ||
    fail "the in_place_restart event does not name node h1, rank 1 and spare h2"
fi
[ -n "$pid0" ] && [ "$after0" = "$pid0" ] ||
  fail "rank 0 was restarted: pid $pid0 before, '$after0' after"
ls "$tmp"/work-h2/job-*/attempt-0/rank-1.stdout > /dev/null 2>&1 ||
  fail "rank 1 did not run on the spare h2 in attempt 0"
grep -hq "read from peer" "$tmp"/work-h2/job-*/attempt-*/rank-1.std* 2> /dev/null ||
  fail "the spare's rank logged no read from a peer's memory"
out0 > "$tmp/rank0.out"
line=$(grep "^in-place restart" "$tmp/rank0.out" | head -n 1)
say "rank 0: $line"
before=$(awk '/^in-place restart/ {exit} /^step=/ {sub(/^step=/, ""); sub(/ .*/, ""); s = $0} END {print s}' "$tmp/rank0.out")
from=$(echo "$line" | sed -n 's/.*continuing from step \([0-9]*\).*/\1/p')
if [ -z "$from" ] || [ -z "$before" ]; then
  fail "no 'continuing from step' after a step line in rank 0's output"
elif [ $((before - from)) -gt 10 ]; then
  fail "$((before - from)) steps computed again (rank 0 had reached $before, continued from $from), want <= 10"
else
  say "steps computed again: $((before - from)) (reached $before, continued from $from)"
fi
grep -q "^step=$STEPS loss=" "$tmp/rank0.out" || fail "rank 0 never reached step $STEPS"
compare_losses "$tmp/reference.out" "$tmp/rank0.out" "in place"

if [ "$failures" -gt 0 ]; then
  echo "--- job output"; tail -n 20 "$tmp/job.out"
  echo "--- events"; cat "$tmp/events"
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

#!/usr/bin/env bash
# strata-coordinator and strata-worker across two simulated hosts
# (tests/simhost/simhost.sh): the coordinator and one worker in host h0, one
# worker in host h1, each host with its own address, hostname and /dev/shm.
#
#   daemons_test.sh BUILD_DIR SOURCE_DIR          (ctest: multihost_daemons_test)
#
# 1. The workers register with their host's address (not loopback).
# 2. `strata submit --wait --follow` of strata-train --model small with
#    tp=2 (dp=2 over 2 hosts x 2 ranks), ZeRO-1, a checkpoint every 2 steps.
# 3. Once the job reports step KILL_AT, h1's worker is SIGKILLed. The job
#    must re-plan on h0 alone (tp=2 dp=1), resume from the last committed
#    checkpoint (ZeRO-1 states resharded from dp=2 to dp=1) and succeed.
# 4. Every loss of both attempts equals a single-process run's.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=multihost_daemons_test
BUILD=${1:?usage: daemons_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: daemons_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
STEPS=8
KILL_AT=4
PORT=7077  # inside h0's own network namespace: no collision with anything

multihost_begin 2 "1gbit" mh-daemons

train_args=(--model small --global-batch 4 --micro-batch 1 --zero 1)
reference_run "$tmp/reference.out" "${train_args[@]}" --steps "$STEPS"

simhost_coordinator "$BUILD" "$tmp" "$PORT"
endpoint=$SIMHOST_ENDPOINT
for i in 0 1; do simhost_worker "$BUILD" "$tmp" "$i"; done
simhost_wait_workers "$BUILD" 2 || die "2 workers did not register within 30 s; logs in $tmp"
workers=$SIMHOST_WORKERS
echo "$workers"
for i in 0 1; do
  addr=$(echo "$workers" | awk -v h="${SIMHOST_NAME[i]}" 'NR > 1 && $1 ~ h {print $3}')
  resolved=$(simhost_exec "$i" getent ahostsv4 "$addr" | awk 'NR == 1 {print $1}')
  say "worker on ${SIMHOST_NAME[i]} advertises '$addr' -> $resolved"
  [ "$resolved" = "${SIMHOST_ADDR[i]}" ] ||
    fail "worker on ${SIMHOST_NAME[i]} advertises '$addr' ($resolved), want ${SIMHOST_ADDR[i]}"
done

cat > "$tmp/job.yaml" << YAML
name: multihost-daemons
global_batch: 4
constraints:
  tp: 2
  pp: 1
launch:
  command: [$TRAIN, --model, small, --global-batch, "4", --micro-batch, "1",
            --zero, "1", --steps, "$STEPS", --ckpt-every, "2", --resume]
  nodes: 2
  ranks_per_node: 2
  min_nodes: 1
  max_restarts: 1
  worker_wait_s: 30
  checkpoint_uri: file://$tmp/ckpt
YAML

start=$SECONDS
simhost_exec 0 timeout -k 5 400 "$STRATA" submit --coordinator "$endpoint" --wait --follow \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1 &
submit_pid=$!
killed=0
for _ in $(seq 1 4100); do  # at most ~410 s
  kill -0 "$submit_pid" 2> /dev/null || break
  if [ "$killed" -eq 0 ] && grep -q "step=$KILL_AT loss=" "$tmp/job.out"; then
    # The ranks of attempt 1 are up on both hosts: none may use loopback.
    check_rank_sockets 0 "attempt 1"
    check_rank_sockets 1 "attempt 1"
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
[ "$rc" -eq 0 ] || fail "strata submit --wait exited $rc, want 0 (job output below)"

# Attempt 2 runs tp=2 dp=1 on h0 and resumes from a committed checkpoint.
resumed=$(sed -n 's/.*resumed step=\([0-9]*\) tp=2 pp=1 dp=1.*/\1/p' "$tmp/job.out" | head -n 1)
if [ -z "$resumed" ]; then
  fail "no 'resumed step=S tp=2 pp=1 dp=1' line: the job did not resume on the host left"
elif [ "$resumed" -lt 2 ] || [ "$resumed" -gt "$KILL_AT" ]; then
  fail "resumed at step $resumed, want a checkpoint in [2, $KILL_AT]"
else
  say "attempt 2 resumed at step $resumed with tp=2 dp=1 on ${SIMHOST_NAME[0]}"
fi
grep -q "step=$STEPS loss=" "$tmp/job.out" || fail "the job never reached step $STEPS"
compare_losses "$tmp/reference.out" "$tmp/job.out" "both attempts"
# The steps after the resume come from attempt 2 alone.
awk -v s="$resumed" '/resumed step=/ {on = 1} on' "$tmp/job.out" > "$tmp/attempt2.out"
compare_losses "$tmp/reference.out" "$tmp/attempt2.out" "attempt 2 (resharded)" \
  "$((${resumed:-0} + 1))"

if [ "$failures" -gt 0 ]; then
  echo "--- job output"; cat "$tmp/job.out"
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

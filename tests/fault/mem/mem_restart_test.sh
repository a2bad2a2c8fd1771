#!/usr/bin/env bash
# Restart from peer memory after a node loss, with the durable checkpoint
# gone (issue 35 part 2; docs/checkpoint.md "Memory tier"). Three simulated
# hosts (own network namespace, hostname and /dev/shm each): the
# coordinator and worker A in h0, worker B in h1, a spare worker C in h2.
#
#   mem_restart_test.sh BUILD_DIR SOURCE_DIR        (ctest: mem_restart_test)
#
# 1. Every worker registers a replica endpoint on its host's address.
# 2. strata-train --model tiny dp=2 on 2 nodes, a memory checkpoint every
#    step (--mem-ckpt-every 1) and a durable one every DURABLE_EVERY steps.
# 3. Past step KILL_AT the durable checkpoint directory is removed, then
#    the worker in h1 is SIGKILLed (its ranks die
#    with it, its /dev/shm is unreachable).
# 4. The job must continue with the same parallelism on the surviving node
#    and the spare, resume from the memory tier (the survivor's own copy and
#    the replica of the lost node's ranks it holds) at a step >= KILL_AT - 20
#    (tiny's ~10 ms steps are shorter than a save's replica round trip, so
#    the agreed rule skips steps while a save is in flight; the bound on
#    steps computed again is the fault bench's, on real step times),
#    the spare's rank reading everything from its peer, and finish with
#    every loss equal to a single-process run's.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=mem_restart_test
BUILD=${1:?usage: mem_restart_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: mem_restart_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
STEPS=${MEM_TEST_STEPS:-300}
KILL_AT=${MEM_TEST_KILL_AT:-40}
DURABLE_EVERY=25
PORT=7077

multihost_begin 3 "" mem-restart

train_args=(--model tiny --global-batch 4 --micro-batch 1)
reference_run "$tmp/reference.out" "${train_args[@]}" --steps "$STEPS"

simhost_coordinator "$BUILD" "$tmp" "$PORT" --heartbeat-ms 200
endpoint=$SIMHOST_ENDPOINT
start_worker() {
  simhost_worker "$BUILD" "$tmp" "$1" --mem-dir /dev/shm/strata-mem --mem-limit 256MiB
}
start_worker 0
start_worker 1
simhost_wait_workers "$BUILD" 2 || die "2 workers did not register within 30 s; logs in $tmp"
for i in 0 1; do
  grep -q "replicas served at ${SIMHOST_NAME[i]}:" "$tmp/worker-h$i.log" ||
    fail "worker on ${SIMHOST_NAME[i]} serves no replica endpoint on its host name"
done

cat > "$tmp/job.yaml" << YAML
name: mem-restart
global_batch: 4
constraints:
  tp: 1
  pp: 1
launch:
  command: [$TRAIN, --model, tiny, --global-batch, "4", --micro-batch, "1",
            --steps, "$STEPS", --ckpt-every, "$DURABLE_EVERY", --mem-ckpt-every, "1",
            --resume]
  nodes: 2
  ranks_per_node: 1
  min_nodes: 2
  max_restarts: 1
  worker_wait_s: 60
  checkpoint_uri: file://$tmp/ckpt
YAML
# Not for the first attempt: the spare registers once the job is placed.
start=$SECONDS
simhost_exec 0 timeout -k 5 240 "$STRATA" submit --coordinator "$endpoint" --wait --follow \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1 &
submit_pid=$!
killed=0
spare=0
for _ in $(seq 1 2400); do  # at most ~240 s
  kill -0 "$submit_pid" 2> /dev/null || break
  if [ "$spare" -eq 0 ] && grep -q "step=2 loss=" "$tmp/job.out"; then
    start_worker 2
    spare=1
  fi
  if [ "$killed" -eq 0 ] && grep -q "step=$KILL_AT loss=" "$tmp/job.out"; then
    # Two nodes: each holds its ranks' state and the replica of the other's,
    # so either may go; h1's does.
    victim=1
    rm -rf "$tmp/ckpt"
    say "step $KILL_AT after $((SECONDS - start)) s: durable checkpoint removed, SIGKILL the worker on ${SIMHOST_NAME[victim]}"
    kill -KILL "${SIMHOST_WORKER_PID[victim]}"
    killed=1
  fi
  sleep 0.1
done
wait "$submit_pid"
rc=$?
say "job ended with exit code $rc after $((SECONDS - start)) s"
[ "$killed" -eq 1 ] || fail "the job never reported step $KILL_AT"
[ "$rc" -eq 0 ] || fail "strata submit --wait exited $rc, want 0"

resumed=$(sed -n 's/.*resume: step \([0-9]*\) from the memory tier.*/\1/p' "$tmp/job.out" | head -n 1)
if [ -z "$resumed" ]; then
  fail "no 'resume: step S from the memory tier' line"
elif [ "$resumed" -lt $((KILL_AT - 20)) ]; then
  fail "resumed at step $resumed from memory, want >= $((KILL_AT - 20))"
else
  say "attempt 2 resumed from the memory tier at step $resumed (killed after step $KILL_AT)"
fi
grep -q "resumed step=$resumed tp=1 pp=1 dp=2" "$tmp/job.out" ||
  fail "attempt 2 did not keep dp=2 (same parallelism on the spare)"
# The spare's rank read the lost node's state from its peer.
if grep -hq "read from peer" "$tmp/work-h2"/*/attempt-*/rank-*.std* 2> /dev/null; then
  say "the spare's rank read its state from a peer's memory"
else
  fail "the spare's rank logged no read from a peer"
fi
grep -q "step=$STEPS loss=" "$tmp/job.out" || fail "the job never reached step $STEPS"
compare_losses "$tmp/reference.out" "$tmp/job.out" "both attempts"

if [ "$failures" -gt 0 ]; then
  echo "--- job output"; tail -n 40 "$tmp/job.out"
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

#!/usr/bin/env bash
# In-place restart end to end (docs/fault.md "In-place restart"):
# strata-train tiny, dp=4 on two simulated hosts (2 ranks each: shm inside
# a host, tcp between), a checkpoint every step to file://, and one rank
# lost mid-run:
#
#   inplace_run_test.sh BUILD_DIR SOURCE_DIR MODE
#     kill  --in-place-restart, rank 1 SIGKILLed, later rank 2 (generation 2)
#     hang  --in-place-restart, rank 3 SIGSTOPped (found by the hang detector)
#     full  no --in-place-restart, rank 1 SIGKILLed: today's full restart
#
# In-place modes (max_restarts 0: a full restart would fail the job): the
# job succeeds in its first attempt, the other ranks' processes keep their
# pids, an in_place_restart event names the rank, and every loss equals a
# single-process run's. Mode full: the attempt is restarted, every rank
# gets a new process, the losses still match. Prints "RECOVERY_S X": the
# failure (SIGKILL / SIGSTOP) -> the next step line rank 0 writes.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
MODE=${3:?usage: inplace_run_test.sh BUILD_DIR SOURCE_DIR kill|hang|full}
TEST_NAME=inplace_${MODE}_test
BUILD=${1:?usage: inplace_run_test.sh BUILD_DIR SOURCE_DIR MODE}
SRC=${2:?usage: inplace_run_test.sh BUILD_DIR SOURCE_DIR MODE}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
STEPS=${INPLACE_STEPS:-80}
FAULT_AT=${INPLACE_FAULT_AT:-25}
case "$MODE" in
  kill | full) VICTIM=1 ;;
  hang) VICTIM=3 ;;
  *) die "unknown mode $MODE (kill, hang or full)" ;;
esac
PORT=7079

multihost_begin 2 "1gbit" inplace

train_args=(--model tiny --global-batch 8 --micro-batch 2)
reference_run "$tmp/reference.out" "${train_args[@]}" --steps "$STEPS"

simhost_daemons "$BUILD" "$tmp" "$PORT" || die "the daemons did not start"
endpoint=$SIMHOST_ENDPOINT

flag=', --in-place-restart'
restarts=0
if [ "$MODE" = full ]; then flag=''; restarts=1; fi
cat > "$tmp/job.yaml" << YAML
name: inplace-$MODE
global_batch: 8
launch:
  command: [$TRAIN, --model, tiny, --global-batch, "8", --micro-batch, "2",
            --steps, "$STEPS", --ckpt-every, "1", --resume$flag]
  nodes: 2
  ranks_per_node: 2
  max_restarts: $restarts
  worker_wait_s: 30
  checkpoint_uri: file://$tmp/ckpt
YAML

start=$SECONDS
simhost_exec 0 timeout -k 5 300 "$STRATA" submit --coordinator "$endpoint" --wait \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1 &
submit_pid=$!
faulted=0
declare -A before
for _ in $(seq 1 3000); do  # at most ~60 s to the fault
  kill -0 "$submit_pid" 2> /dev/null || break
  s=$(last_step)
  if [ -n "$s" ] && [ "$s" -ge "$FAULT_AT" ]; then
    for r in 0 1 2 3; do before[$r]=$(rank_pid "$r"); done
    victim=${before[$VICTIM]}
    [ -n "$victim" ] || die "rank $VICTIM's process not found"
    t0=$(date +%s.%N)
    if [ "$MODE" = hang ]; then kill -STOP "$victim"; else kill -KILL "$victim"; fi
    say "step $s: $( [ "$MODE" = hang ] && echo SIGSTOP || echo SIGKILL ) rank $VICTIM (pid $victim)"
    faulted=1
    break
  fi
  sleep 0.02
done
[ "$faulted" -eq 1 ] || die "the job never reached step $FAULT_AT: $(tail -n 5 "$tmp/job.out")"
# The failure -> the next step line of rank 0 completed after the
# recovery (lines of steps that were in flight when the fault came do not
# count): after its "in-place restart" line, or in the next attempt's
# output for a full restart.
recovered_steps() {
  if [ "$MODE" = full ]; then
    cat "$tmp"/work-h0/job-*/attempt-1/rank-0.stdout 2> /dev/null | grep -c '^step='
  else
    steps_in_place
  fi
}
recovered=""
for _ in $(seq 1 6000); do  # at most ~120 s
  if [ "$(recovered_steps)" -gt 0 ]; then
    recovered=$(echo "$(date +%s.%N) - $t0" | bc)
    break
  fi
  kill -0 "$submit_pid" 2> /dev/null || break
  sleep 0.02
done
if [ -n "$recovered" ]; then
  say "RECOVERY_S $recovered (failure -> next completed step)"
else
  fail "no step completed after the recovery"
fi
after=()
for r in 0 1 2 3; do after[r]=$(rank_pid "$r"); done
# Mode kill: a second rank (on the other host) is killed later, so the
# attempt goes through generation 2 as well.
SECOND=2
if [ "$MODE" = kill ] && [ -n "$recovered" ]; then
  for _ in $(seq 1 3000); do
    kill -0 "$submit_pid" 2> /dev/null || break
    s=$(last_step)
    [ -n "$s" ] && [ "$s" -ge $((FAULT_AT + 15)) ] && break
    sleep 0.02
  done
  second=$(rank_pid "$SECOND")
  if [ -n "$second" ] && kill -KILL "$second"; then
    say "step $(last_step): SIGKILL rank $SECOND (pid $second)"
    for _ in $(seq 1 3000); do
      [ "$(out0 | grep -c '^in-place restart: generation 2')" -gt 0 ] && break
      kill -0 "$submit_pid" 2> /dev/null || break
      sleep 0.02
    done
    out0 | grep -q '^in-place restart: generation 2' ||
      fail "no second in-place restart (generation 2) after rank $SECOND died"
  else
    fail "rank $SECOND's process not found for the second fault"
  fi
fi
wait "$submit_pid"
rc=$?
say "job ended with exit code $rc after $((SECONDS - start)) s"
[ "$rc" -eq 0 ] || fail "strata submit --wait exited $rc, want 0"
job=$(grep -o 'job-[0-9]*' "$tmp/job.out" | head -n 1)
simhost_exec 0 timeout 10 "$STRATA" events --coordinator "$endpoint" "$job" \
  > "$tmp/events" 2>&1 || fail "strata events $job failed: $(cat "$tmp/events")"

if [ "$MODE" = full ]; then
  grep -q "attempt_failed" "$tmp/events" || fail "no attempt_failed event: not a full restart"
  grep -q "in_place_restart" "$tmp/events" && fail "an in_place_restart without --in-place-restart"
  for r in 0 2 3; do
    [ -n "${after[r]}" ] && [ "${after[r]}" = "${before[$r]}" ] &&
      fail "rank $r kept pid ${after[r]} through a full restart"
  done
  # Both attempts' outputs together.
  cat "$tmp"/work-h0/job-*/attempt-*/rank-0.stdout > "$tmp/rank0.out"
else
  grep -q "attempt_failed" "$tmp/events" && fail "the attempt was restarted: $(grep attempt_failed "$tmp/events")"
  ev=$(grep "in_place_restart" "$tmp/events" | head -n 1)
  if [ -z "$ev" ]; then
    fail "no in_place_restart event"
  else
    say "event: $ev"
    echo "$ev" | grep -q "rank $VICTIM " || fail "the in_place_restart event does not name rank $VICTIM"
  fi
  if [ "$MODE" = kill ]; then
    [ "$(grep -c in_place_restart "$tmp/events")" -eq 2 ] ||
      fail "want 2 in_place_restart events (ranks $VICTIM and $SECOND), got: $(grep -c in_place_restart "$tmp/events")"
  fi
  for r in 0 1 2 3; do
    [ "$r" -eq "$VICTIM" ] && continue
    if [ -z "${after[r]}" ] || [ "${after[r]}" != "${before[$r]}" ]; then
      fail "rank $r was restarted: pid ${before[$r]} before, '${after[r]}' after"
    fi
  done
  [ -n "${after[VICTIM]}" ] && [ "${after[VICTIM]}" = "${before[$VICTIM]}" ] &&
    fail "rank $VICTIM kept its pid: it was not replaced"
  say "ranks other than $VICTIM kept their pids; rank $VICTIM: ${before[$VICTIM]} -> ${after[VICTIM]:-exited}"
  out0 > "$tmp/rank0.out"
  grep "in-place restart" "$tmp/rank0.out" | sed "s/^/  rank 0: /"
fi
grep -q "^step=$STEPS loss=" "$tmp/rank0.out" || fail "rank 0 never reached step $STEPS"
compare_losses "$tmp/reference.out" "$tmp/rank0.out" "$MODE"

if [ "$failures" -gt 0 ]; then
  echo "--- job output"; tail -n 20 "$tmp/job.out"
  echo "--- events"; cat "$tmp/events"
  echo "--- coordinator log"; tail -n 30 "$tmp/coordinator.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

#!/usr/bin/env bash
# The memory tier's limit (docs/checkpoint.md "Memory tier"): workers that
# may hold less than one step's state refuse it, say so, and the job trains
# on, its durable checkpoints unharmed. Two simulated hosts.
#
#   mem_limit_test.sh BUILD_DIR SOURCE_DIR            (ctest: mem_limit_test)
#
# 1. Workers with --mem-limit 64KiB (a tiny model's state is ~1 MiB).
# 2. strata-train dp=2, --mem-ckpt-every 1, durable every 4 steps.
# 3. Expect: exit 0; every worker log names the refusal and the limit; the
#    refusal is a "mem_tier" event of the job (`strata events`); the ranks
#    log the failed memory saves with the fallback; no step is committed
#    in any memory directory; the durable tier has its steps.
# 4. A bad --mem-limit is refused at start with exit 2 naming the flag.
# Exit 77 (ctest SKIP) only when the simulated hosts cannot be created.
set -uo pipefail
TEST_NAME=mem_limit_test
BUILD=${1:?usage: mem_limit_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: mem_limit_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STRATA="$BUILD/cli/strata"
STEPS=12
PORT=7077

multihost_begin 2 "" mem-limit

# A bad limit: refused before anything starts.
out=$(simhost_exec 0 timeout 10 "$BUILD/worker/strata-worker" --coordinator tcp://127.0.0.1:1 \
  --work-dir "$tmp/bad" --mem-limit 2.5 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "--mem-limit 2.5 exited $rc, want 2"
echo "$out" | grep -q -- "--mem-limit 2.5" || fail "--mem-limit 2.5 not named: $out"

simhost_coordinator "$BUILD" "$tmp" "$PORT" --heartbeat-ms 200
endpoint=$SIMHOST_ENDPOINT
for i in 0 1; do
  simhost_worker "$BUILD" "$tmp" "$i" --mem-dir /dev/shm/strata-mem --mem-limit 64KiB
done
cat > "$tmp/job.yaml" << YAML
name: mem-limit
global_batch: 4
constraints:
  tp: 1
  pp: 1
launch:
  command: [$TRAIN, --model, tiny, --global-batch, "4", --micro-batch, "1",
            --steps, "$STEPS", --ckpt-every, "4", --mem-ckpt-every, "1"]
  nodes: 2
  ranks_per_node: 1
  worker_wait_s: 30
  checkpoint_uri: file://$tmp/ckpt
YAML
simhost_exec 0 timeout -k 5 120 "$STRATA" submit --coordinator "$endpoint" --wait --follow \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "the job exited $rc, want 0 (memory-tier failures are not fatal)"
for i in 0 1; do
  grep -q "memory tier of worker .* is full: .* limit 0.1 MiB (strata-worker --mem-limit)" \
    "$tmp/worker-h$i.log" || fail "worker on ${SIMHOST_NAME[i]} did not log the refusal"
  committed=$(simhost_exec "$i" sh -c 'ls -d /dev/shm/strata-mem/*/step-*/manifest.pb 2> /dev/null | wc -l')
  [ "$committed" -eq 0 ] || fail "${SIMHOST_NAME[i]} holds $committed committed memory steps over its limit"
done
job=$(grep -o 'job-[0-9]*' "$tmp/job.out" | head -n 1)
simhost_exec 0 timeout 10 "$STRATA" events --coordinator "$endpoint" "$job" \
  > "$tmp/events" 2>&1 || fail "strata events $job failed: $(cat "$tmp/events")"
grep -q "mem_tier.*mem_full.*is full: .*strata-worker --mem-limit" "$tmp/events" ||
  fail "no mem_tier event names the refusal: $(cat "$tmp/events")"
grep -hq "memory tier: a save failed .*falls back to the durable tier file://" \
  "$tmp"/work-h*/*/attempt-*/rank-*.stderr || fail "no rank logged the failed memory save and its fallback"
steps=$("$STRATA" ckpt ls "file://$tmp/ckpt" 2> /dev/null | grep -c '^ *[0-9]')
[ "$steps" -ge 1 ] || fail "the durable tier has no committed step"
say "refusals logged on both workers and as job events, the job trained on, durable steps: $steps"

if [ "$failures" -gt 0 ]; then
  echo "--- job output"; tail -n 30 "$tmp/job.out"
  echo "--- worker h0"; tail -n 20 "$tmp/worker-h0.log"
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

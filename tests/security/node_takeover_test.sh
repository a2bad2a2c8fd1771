#!/usr/bin/env bash
# Finding 1 of issue 30 against real processes (docs/security.md "Roles"):
# a coordinator with per-role keys, the worker of node dn1, and alice's job
# on it. Then the attacks of the issue, each of which must be refused and
# logged while alice's job runs on:
#   - the rank's environment holds no worker key, only its own curve dir;
#   - the rank's key cannot list jobs;
#   - bob (another user) cannot cancel alice's job;
#   - a second strata-worker with dn1's own key cannot take over dn1.
# Usage: node_takeover_test.sh BUILD_DIR
set -u
build=${1:?usage: node_takeover_test.sh BUILD_DIR}
strata=$build/cli/strata
tmp=$(mktemp -d /tmp/strata-sec-takeover.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }

ep="ipc://$tmp/coordinator.sock"
"$strata" keygen --out "$tmp/coord" --name server > /dev/null || fail "keygen server"
"$strata" keygen --out "$tmp/dn1" --name dn1 --authorize "$tmp/coord" --role worker --node dn1 > /dev/null || fail "keygen worker"
"$strata" keygen --out "$tmp/alice" --name alice --authorize "$tmp/coord" --role user > /dev/null || fail "keygen alice"
"$strata" keygen --out "$tmp/bob" --name bob --authorize "$tmp/coord" --role user > /dev/null || fail "keygen bob"
# A user key without a role is refused by keygen itself.
if "$strata" keygen --out "$tmp/x" --name x --authorize "$tmp/coord" > /dev/null 2>&1; then
  fail "keygen --authorize without --role succeeded"
fi

"$build/coordinator/strata-coordinator" --state-dir "$tmp/state" --listen "$ep" \
  --curve-dir "$tmp/coord" > "$tmp/coordinator.log" 2>&1 &
pids+=($!)
"$build/worker/strata-worker" --coordinator "$ep" --node-name dn1 --address 127.0.0.1 \
  --curve-dir "$tmp/dn1" --work-dir "$tmp/work-dn1" > "$tmp/worker.log" 2>&1 &
pids+=($!)

as() {  # as USER SUBCOMMAND ARGS...
  local who=$1 sub=$2; shift 2
  STRATA_CURVE_DIR="$tmp/$who" "$strata" "$sub" --coordinator "$ep" "$@"
}
for _ in $(seq 1 100); do
  as alice workers 2>/dev/null | grep -q "dn1.*yes" && break; sleep 0.1
done
as alice workers | grep -q "dn1.*yes" || fail "worker dn1 did not register"

job=$(as alice submit --nodes 1 --ranks-per-node 1 -- /bin/sh -c 'env; sleep 60' 2>&1 |
      grep -o 'job-[0-9]*' | head -n 1)
[ -n "$job" ] || fail "alice could not submit"
out="$tmp/work-dn1/$job/attempt-0/rank-0.stdout"
for _ in $(seq 1 100); do grep -q STRATA_CURVE_DIR "$out" 2>/dev/null && break; sleep 0.1; done
rank_dir=$(sed -n 's/^STRATA_CURVE_DIR=//p' "$out")
[ "$rank_dir" = "$tmp/work-dn1/$job/attempt-0/rank-0.curve" ] ||
  fail "rank's STRATA_CURVE_DIR is '$rank_dir', not its own dir"
grep -q "$tmp/dn1" "$out" && fail "the worker's curve dir reached the rank"
[ "$(stat -c %a "$tmp/work-dn1")" = 700 ] || fail "work dir is not 0700"

# The rank's key lists nothing.
if STRATA_CURVE_DIR="$rank_dir" "$strata" status --coordinator "$ep" > "$tmp/rank-status.out" 2>&1; then
  fail "a rank key listed jobs"
fi
grep -q "may not list jobs" "$tmp/rank-status.out" || fail "rank refusal does not say why: $(cat "$tmp/rank-status.out")"

# bob cannot cancel alice's job.
if as bob cancel "$job" > "$tmp/bob.out" 2>&1; then fail "bob cancelled alice's job"; fi
grep -q "not a job of theirs" "$tmp/bob.out" || fail "bob's refusal does not say why: $(cat "$tmp/bob.out")"

# A second worker with dn1's own key cannot take the live node.
"$build/worker/strata-worker" --coordinator "$ep" --node-name dn1 --address 127.0.0.1 \
  --curve-dir "$tmp/dn1" --work-dir "$tmp/work-impostor" > "$tmp/impostor.log" 2>&1 &
pids+=($!)
sleep 2
grep -q "already has a live worker" "$tmp/coordinator.log" || fail "no refusal of the second dn1 in the coordinator's log"
grep -q "refused:" "$tmp/coordinator.log" || fail "refusals are not logged"

status=$(as alice status "$job" 2>&1)
echo "$status" | grep -q RUNNING || fail "alice's job is not running: $status"
echo "$status" | grep -q "attempt 0 (restarts 0 of" || fail "alice's job restarted: $status"
as alice cancel "$job" > /dev/null || fail "alice cannot cancel her own job"
echo "$status" | head -n 5
grep "refused\|already has" "$tmp/coordinator.log" | head -n 5
echo "PASS"

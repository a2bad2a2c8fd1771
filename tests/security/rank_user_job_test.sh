#!/bin/bash
# Ranks as a less privileged user, end to end (docs/security.md "Ranks as
# another user"): a root strata-worker with --rank-user nobody under CURVE
# runs a 2-rank strata-train job. Each rank runs as nobody, cannot read the
# worker's secret key, and still reaches everything it needs: its plan, its
# own CURVE keys (rendezvous through the coordinator's KV) and the
# telemetry socket (the coordinator sees its steps). The job must succeed.
# Root only (prints SKIP otherwise).
# Usage: rank_user_job_test.sh BUILD_DIR
set -u
build=${1:?usage: rank_user_job_test.sh BUILD_DIR}
if [ "$(id -u)" != 0 ] || ! id nobody > /dev/null 2>&1; then
  echo "SKIP: needs root and a 'nobody' user"; exit 0
fi
strata=$build/cli/strata
tmp=$(mktemp -d /tmp/strata-sec-rankuser.XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log "$tmp"/work/job-*/attempt-0/rank-*.std*; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }

"$strata" keygen --out "$tmp/coord" --name server > /dev/null || fail "keygen server"
"$strata" keygen --out "$tmp/dn1" --name dn1 --authorize "$tmp/coord" --role worker --node dn1 > /dev/null || fail "keygen worker"
"$strata" keygen --out "$tmp/alice" --name alice --authorize "$tmp/coord" --role user > /dev/null || fail "keygen alice"
chmod 755 "$tmp/dn1"  # only the key file's own mode (0600 root) protects it
secret=$(ls "$tmp"/dn1/*.key_secret | head -n 1)
[ "$(stat -c %a "$secret")" = 600 ] || fail "worker secret key is not 0600"

# Refused: an unknown rank user (exit 2, naming it).
"$build/worker/strata-worker" --coordinator tcp://127.0.0.1:1 --node-name dn1 \
  --work-dir "$tmp/work-x" --rank-user no-such-user-strata > "$tmp/bad.out" 2>&1
[ $? = 2 ] || fail "--rank-user no-such-user-strata did not exit 2"
grep -q "no user 'no-such-user-strata'" "$tmp/bad.out" || fail "refusal does not name the user: $(cat "$tmp/bad.out")"

# TCP, not ipc://: the ranks (nobody) reach the coordinator's KV as on a
# real cluster.
"$build/coordinator/strata-coordinator" --state-dir "$tmp/state" \
  --listen tcp://127.0.0.1:0 --curve-dir "$tmp/coord" \
  > "$tmp/coordinator.out" 2> "$tmp/coordinator.log" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^listening' "$tmp/coordinator.out" && break; sleep 0.1; done
ep=$(awk '/^listening/ {print $2}' "$tmp/coordinator.out")
[ -n "$ep" ] || fail "coordinator did not start"
"$build/worker/strata-worker" --coordinator "$ep" --node-name dn1 --address 127.0.0.1 \
  --curve-dir "$tmp/dn1" --work-dir "$tmp/work" --rank-user nobody > "$tmp/worker.log" 2>&1 &
pids+=($!)
as() { local who=$1 sub=$2; shift 2; STRATA_CURVE_DIR="$tmp/$who" "$strata" "$sub" --coordinator "$ep" "$@"; }
for _ in $(seq 1 100); do as alice workers 2>/dev/null | grep -q "dn1.*yes" && break; sleep 0.1; done
as alice workers | grep -q "dn1.*yes" || fail "worker dn1 did not register"

job=$(as alice submit --nodes 1 --ranks-per-node 2 -- /bin/sh -c \
  "echo uid=\$(id -u); cat $secret > /dev/null 2>&1 && echo KEY-READ || echo KEY-DENIED;
   exec $build/runtime/strata-train --model tiny --steps 20 --global-batch 8 --micro-batch 1" 2>&1 |
  grep -o 'job-[0-9]*' | head -n 1)
[ -n "$job" ] || fail "alice could not submit"
for _ in $(seq 1 600); do
  as alice status "$job" 2>/dev/null | grep -qE "SUCCEEDED|FAILED" && break; sleep 0.1
done
status=$(as alice status "$job" 2>&1)
echo "$status" | grep -q SUCCEEDED || fail "job did not succeed: $status"
for r in 0 1; do
  out="$tmp/work/$job/attempt-0/rank-$r.stdout"
  grep -q "uid=$(id -u nobody)" "$out" || fail "rank $r did not run as nobody"
  grep -q KEY-DENIED "$out" || fail "rank $r read the worker's secret key"
done
grep -q "telemetry: refused" "$tmp/worker.log" && fail "the worker refused its own ranks' reports"
[ "$(stat -c %U:%a "$tmp/work")" = "root:710" ] || fail "work dir is $(stat -c %U:%a "$tmp/work"), not root:710"
# Their steps reached the coordinator through the telemetry socket.
[ "$(echo "$status" | grep -cE 'exited 0 +[0-9]+ +20 ')" = 2 ] || fail "step 20 of both ranks not reported: $status"
echo "PASS: ranks ran as nobody, could not read $secret, and job $job succeeded"

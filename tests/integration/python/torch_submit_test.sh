#!/usr/bin/env bash
# torchrun's command line on strata's daemons: a torch DDP script
# (ddp_monitor.py, gloo, strata.torch's step monitor, dcp.save every 10
# steps through strata.torch.StorageWriter) submitted as
#   strata submit --nnodes 2 --nproc-per-node 1 ddp_monitor.py ARGS
# to a strata-coordinator with a strata-worker on each of two simulated
# hosts (tests/simhost/simhost.sh) runs to completion with one rank per
# host (`strata run` in this form: fsdp2_restart_test). While the ranks
# hold after their last step, the monitor's sections must show in `strata
# diagnose` (compute and the DDP all-reduce wait per rank), the heat map,
# the trace (forward, backward, optimizer and checkpoint sections per rank)
# and goodput (the DCP saves as checkpoint time). Exit 77 (ctest SKIP) when
# the hosts cannot be made or PyPI's torch is unavailable.
# Usage: torch_submit_test.sh BUILD_DIR SOURCE_DIR.
set -uo pipefail
build=$1
src=$2
# shellcheck source=tests/integration/python/torch_env.sh
. "$src/tests/integration/python/torch_env.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$src/tests/simhost/simhost.sh"
STRATA=$build/cli/strata
script=$src/tests/integration/python/ddp_monitor.py
STEPS=30
# ~45-60 s under a loaded `ctest -j2`, most of it the ranks importing torch.
die() { echo "FAIL: $*"; exit 1; }

t0=$SECONDS
simhost_up 2
rc=$?
[ "$rc" -eq 77 ] && { echo "SKIP: simulated hosts unavailable here"; exit 77; }
[ "$rc" -eq 0 ] || die "simhost_up failed"
dir=$(mktemp -d /tmp/strata-torch-submit-XXXXXX)
chmod 755 "$dir"
cleanup() {
  trap - EXIT INT TERM
  simhost_down
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
unset STRATA_CURVE_DIR
# The daemons get the venv's PATH (torch_env.sh): the ranks inherit it.
simhost_daemons "$build" "$dir" 7077 || { cat "$dir"/*.log; die "2 workers did not register"; }
endpoint=$SIMHOST_ENDPOINT
echo "workers registered ($((SECONDS - t0)) s)"

# Words after the script are the script's, even when they look like flags.
# The ranks hold after the last step (a strata phase) until $dir/release
# exists, so the running attempt can be queried. hang_floor_s: without it
# the job was found hung as its ranks left the phase and exited (the step
# deadline, adaptive from 3 s, seen counted from the last step).
simhost_exec 0 timeout -k 5 300 "$STRATA" submit --coordinator "$endpoint" \
  --wait --follow --fault hang_floor_s=60 \
  --nnodes 2 --nproc-per-node 1 "$script" "$STEPS" --dim 64 \
  --ckpt "file://$dir/ck" --hold "$dir/release" > "$dir/submit.out" 2>&1 &
submit=$!
q() { simhost_exec 0 timeout 30 "$STRATA" "$@" --coordinator "$endpoint"; }
job=job-1  # the coordinator's first job
for _ in $(seq 1 480); do  # at most ~240 s
  kill -0 "$submit" 2> /dev/null || break
  at=$(q status "$job" 2> /dev/null | awk -v s="$STEPS" '$1 ~ /^[01]$/ && $5 == s' | wc -l)
  [ "$at" -eq 2 ] && break
  sleep 0.5
done
[ "$at" -eq 2 ] || { touch "$dir/release"; wait "$submit"; cat "$dir/submit.out"; die "the ranks did not reach step $STEPS"; }
echo "both ranks at step $STEPS ($((SECONDS - t0)) s)"
# strata.torch's step sections reach the coordinator: diagnose (compute and
# the DDP all-reduce wait per rank), the heat map, the trace (forward,
# backward, optimizer, checkpoint per rank) and goodput (checkpoint).
q diagnose "$job" --format json > "$dir/diagnose.json" || die "strata diagnose failed"
q heatmap "$job" --what wait -o "$dir/wait.svg" > "$dir/heatmap.out" || die "strata heatmap failed"
q trace "$job" -o "$dir/trace.json" > "$dir/trace.out" 2>&1 || { cat "$dir/trace.out"; die "strata trace failed"; }
q status "$job" > "$dir/status.out" || die "strata status failed"
/usr/bin/python3 - "$dir" "$STEPS" << 'PY' || die "the monitor's sections did not reach the coordinator"
import collections, json, re, sys
d, steps = sys.argv[1], int(sys.argv[2])
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)
diag = json.load(open(f"{d}/diagnose.json"))
ranks = {r["rank"]: r for r in diag["ranks"]}
for rank, node in ((0, "h0"), (1, "h1")):
    r = ranks.get(rank, {})
    check(r.get("node") == node and int(r.get("last_step", 0)) == steps,
          f"diagnose: rank {rank} on {node} at step {steps}")
    check(r.get("compute_s", 0) > 0 and r.get("wait_s", 0) > 0,
          f"diagnose: rank {rank} compute_s {r.get('compute_s')} and all-reduce wait_s {r.get('wait_s')} > 0")
svg = open(f"{d}/wait.svg").read()
check(f"2 ranks x {steps} steps" in open(f"{d}/heatmap.out").read()
      and f"rank 1 step {steps}:" in svg, "heatmap: 2 ranks x all steps")
trace = json.load(open(f"{d}/trace.json"))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
n = collections.Counter((e["name"], e.get("pid")) for e in events if e.get("ph") == "X")
for rank in (0, 1):
    for name, want in (("forward", steps), ("backward", steps),
                       ("optimizer", steps), ("checkpoint", steps // 10)):
        check(n[(name, rank)] == want,
              f"trace: rank {rank} has {n[(name, rank)]} '{name}' sections, want {want}")
good = re.search(r"^goodput .*", open(f"{d}/status.out").read(), re.M)
check(good and re.search(r"checkpoint [0-9.]+s", good.group(0)),
      f"goodput counts the DCP saves: {good.group(0) if good else None}")
sys.exit(0 if ok else 1)
PY
echo "queried ($((SECONDS - t0)) s)"
touch "$dir/release"
wait "$submit" || { cat "$dir/submit.out"; die "strata submit failed"; }
status=$(q status "$job" --format json)
echo "$status" | grep -q '"SUCCEEDED"' || { echo "$status"; die "$job did not succeed"; }
for h in h0 h1; do  # one rank on each host
  echo "$status" | grep -q "\"w-$h\"" || { echo "$status"; die "no rank on $h"; }
done
submitted=$(grep -o "done steps=$STEPS .*loss=[0-9.]*" "$dir/submit.out" | grep -o "loss=.*")
[ -n "$submitted" ] || { cat "$dir/submit.out"; die "no 'done steps=$STEPS' line"; }
echo "strata submit (torchrun form, 2 simulated hosts): $job $submitted ($((SECONDS - t0)) s)"

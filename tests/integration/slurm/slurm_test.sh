#!/usr/bin/env bash
# deploy/slurm/strata.sbatch end to end on a real single-host Slurm.
#
#   slurm_test.sh BUILD_DIR SOURCE_DIR        (ctest: slurm_test)
#
# Configures and starts munged, slurmctld and slurmd (Debian's munge,
# slurmctld, slurmd, slurm-client: deploy/install-deps.sh) as root under a
# temporary directory, on loopback and free ports, with the config only in
# $SLURM_CONF (nothing under /etc is touched); waits (bounded) for the node
# to be idle; then runs `sbatch --wait strata.sbatch` for a 2-rank job whose
# ranks dump their environment, a failing job and a job file that does not
# exist, the 2-rank job again through SubmitViaSlurm (`strata submit
# --slurm`), and checks exit codes, outputs and that nothing is left running.
# Every daemon it started is stopped on exit (trap). Exit 77 (ctest SKIP)
# with a message only when Slurm is not installed or cannot start here.
set -uo pipefail

SKIP=77
build=${1:?usage: slurm_test.sh BUILD_DIR SOURCE_DIR}
src=${2:?usage: slurm_test.sh BUILD_DIR SOURCE_DIR}
sbatch_script="$src/deploy/slurm/strata.sbatch"
# shellcheck source=slurm_lib.sh
source "$src/tests/integration/slurm/slurm_lib.sh"

skip() { echo "SKIP slurm_test: $*"; exit "$SKIP"; }
fail() { echo "FAIL slurm_test: $*"; failures=$((failures + 1)); }
failures=0

[ "$EUID" -eq 0 ] || skip "needs root to run slurmctld/slurmd/munged"
for b in munged mungekey slurmctld slurmd sbatch sinfo scontrol squeue scancel; do
  command -v "$b" > /dev/null || PATH="$PATH:/usr/sbin" command -v "$b" > /dev/null ||
    skip "'$b' not installed (deploy/install-deps.sh installs munge slurmctld slurmd slurm-client)"
done
export PATH="$PATH:/usr/sbin"
for b in cli/strata coordinator/strata-coordinator worker/strata-worker \
         cli/strata_slurm_submit; do
  [ -x "$build/$b" ] || { echo "FAIL slurm_test: $build/$b not built"; exit 1; }
done

tmp=$(mktemp -d /tmp/strata-slurm-test-XXXXXX)
export SLURM_CONF="$tmp/slurm.conf"
pids=()

# shellcheck disable=SC2317  # runs from the trap
cleanup() {
  trap - EXIT INT TERM
  if [ -n "${slurmctld_up:-}" ]; then
    timeout 10 scancel --full --quiet --user=root 2> /dev/null
    for _ in $(seq 1 50); do
      [ -z "$(timeout 5 squeue -h 2> /dev/null)" ] && break
      sleep 0.2
    done
  fi
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do slurm_stop_pid "${pids[i]}"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

node=$(hostname -s)
# Three distinct free loopback ports (all bound at once, then released).
if ! read -r ctld_port slurmd_port strata_port < <(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])'); then
  skip "cannot pick free ports"
fi
mkdir -p "$tmp/out" "$tmp/spool/$node"

# --- munge and slurm -----------------------------------------------------------
slurm_start_munge "$tmp" || skip "$SLURM_LIB_ERROR"
{
  slurm_conf_common stratatest "$node" 127.0.0.1 "$ctld_port" "$slurmd_port" "$tmp"
  cat << CONF
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
} > "$SLURM_CONF"
slurmctld -D -f "$SLURM_CONF" > "$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmctld_up=1
slurmd -D -f "$SLURM_CONF" -N "$node" > "$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
if ! slurm_wait_idle 1; then
  tail -n 20 "$tmp/log/"*.log "$tmp/log/"*.out 2> /dev/null
  skip "Slurm did not start here (no idle node after 60 s; logs above)"
fi
echo "slurm_test: single-host Slurm up (node $node idle, slurmctld :$ctld_port)"

# --- jobs --------------------------------------------------------------------
run_sbatch() {  # NAME JOB_YAML: sbatch --wait the strata script; sets rc, out
  local name=$1 yaml=$2
  out="$tmp/$name.out"
  STRATA_BIN_DIR="$build" STRATA_PORT="$strata_port" STRATA_STATE_DIR="$tmp/state-$name" \
    STRATA_STARTUP_TIMEOUT=60 timeout -k 10 240 \
    sbatch --wait --nodes=1 --output="$out" "$sbatch_script" "$yaml" > /dev/null 2>&1
  rc=$?
}

cat > "$tmp/env.yaml" << YAML
name: slurm-env
launch:
  command: ["/bin/sh", "-c", "env > $tmp/out/env.\$RANK; echo rank \$RANK of \$WORLD_SIZE"]
  ranks_per_node: 2
YAML
run_sbatch env "$tmp/env.yaml"
[ "$rc" -eq 0 ] || fail "2-rank job: sbatch --wait exited $rc, want 0"
grep -q "SUCCEEDED" "$out" || fail "2-rank job: no SUCCEEDED in the job output"
for r in 0 1; do
  f="$tmp/out/env.$r"
  [ -f "$f" ] || { fail "rank $r wrote no environment"; continue; }
  get() { sed -n "s/^$1=//p" "$f" | head -n 1; }
  [ "$(get RANK)" = "$r" ] || fail "rank $r: RANK='$(get RANK)'"
  [ "$(get WORLD_SIZE)" = 2 ] || fail "rank $r: WORLD_SIZE='$(get WORLD_SIZE)'"
  [ "$(get LOCAL_RANK)" = "$r" ] || fail "rank $r: LOCAL_RANK='$(get LOCAL_RANK)'"
  [ "$(get LOCAL_WORLD_SIZE)" = 2 ] || fail "rank $r: LOCAL_WORLD_SIZE='$(get LOCAL_WORLD_SIZE)'"
  [ "$(get NODE_RANK)" = 0 ] || fail "rank $r: NODE_RANK='$(get NODE_RANK)'"
  [ -n "$(get MASTER_ADDR)" ] || fail "rank $r: MASTER_ADDR empty"
  [ -n "$(get MASTER_PORT)" ] || fail "rank $r: MASTER_PORT empty"
  [ -n "$(get STRATA_JOB_ID)" ] || fail "rank $r: STRATA_JOB_ID empty"
  case "$(get STRATA_STORE)" in
    *":$strata_port") ;;
    *) fail "rank $r: STRATA_STORE='$(get STRATA_STORE)' is not the coordinator on :$strata_port" ;;
  esac
  grep -q "^\[rank $r\] rank $r of 2$" "$out" || fail "rank $r's output missing from the job output"
done
if [ "$failures" -gt 0 ]; then echo "--- job output"; cat "$out"; fi

cat > "$tmp/fail.yaml" << 'YAML'
name: slurm-fail
launch:
  command: ["/bin/sh", "-c", "exit $RANK"]
  ranks_per_node: 2
YAML
run_sbatch fail "$tmp/fail.yaml"
[ "$rc" -eq 1 ] || { fail "failing job: sbatch --wait exited $rc, want 1"; cat "$out"; }

run_sbatch missing "$tmp/no-such-job.yaml"
[ "$rc" -eq 2 ] || { fail "missing job file: exited $rc, want 2"; cat "$out"; }
grep -q "no readable job file" "$out" || fail "missing job file: no clear message"

# The same job through SubmitViaSlurm (`strata submit --slurm`): the
# embedded script with its parameters filled in, sbatch --wait.
if [ -x "$build/cli/strata_slurm_submit" ]; then
  rm -f "$tmp/out/env."*
  timeout -k 10 240 "$build/cli/strata_slurm_submit" "$tmp/env.yaml" "$tmp/submit" \
    "$strata_port" > "$tmp/submit.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || { fail "SubmitViaSlurm: exited $rc, want 0"; cat "$tmp/submit.log" "$tmp/submit/"*.out; }
  if [ ! -f "$tmp/out/env.0" ] || [ ! -f "$tmp/out/env.1" ]; then
    fail "SubmitViaSlurm: the ranks did not run"
  fi
  grep -q "export STRATA_JOB_YAML='$tmp/env.yaml'" "$tmp/submit/strata.sbatch" ||
    fail "SubmitViaSlurm: the script does not carry the job file"
else
  fail "$build/cli/strata_slurm_submit not built"
fi

# Nothing strata started may outlive its Slurm job.
sleep 1
if pgrep -f "strata-(coordinator|worker) .*$strata_port" > /dev/null; then
  fail "a strata-coordinator or strata-worker outlived its job"
  pgrep -af "strata-(coordinator|worker)"
fi

if [ "$failures" -gt 0 ]; then
  echo "slurm_test: $failures check(s) failed"
  exit 1
fi
echo "slurm_test: all checks passed"

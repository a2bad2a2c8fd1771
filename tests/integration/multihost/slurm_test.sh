#!/usr/bin/env bash
# deploy/slurm/strata.sbatch on a real Slurm across two simulated hosts
# (tests/simhost/simhost.sh): munged and slurmctld in the root namespace,
# one slurmd in each host (NodeName = the host's hostname, h0 and h1), then
# `sbatch --nodes=2 strata.sbatch job.yaml` for strata-train --model small
# with tp=2 pp=2 (one pipeline stage per host, 2 ranks each). The job must
# succeed, its ranks must use no loopback socket and talk across the hosts,
# and its losses must equal a single-process run's.
#
#   slurm_test.sh BUILD_DIR SOURCE_DIR        (ctest: multihost_slurm_test)
#
# Nothing under /etc is touched: the config is only in $SLURM_CONF. Exit 77
# (ctest SKIP) only when Slurm is not installed or the hosts cannot be made.
set -uo pipefail
TEST_NAME=multihost_slurm_test
BUILD=${1:?usage: slurm_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: slurm_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"
# shellcheck source=tests/integration/slurm/slurm_lib.sh
source "$SRC/tests/integration/slurm/slurm_lib.sh"

export PATH="$PATH:/usr/sbin"
for b in munged mungekey slurmctld slurmd sbatch sinfo scontrol squeue scancel; do
  command -v "$b" > /dev/null ||
    skip "'$b' not installed (deploy/install-deps.sh installs munge slurmctld slurmd slurm-client)"
done
need_bins runtime/strata-train cli/strata coordinator/strata-coordinator worker/strata-worker
STEPS=12

simhost_up 2
rc=$?
[ "$rc" -eq 77 ] && skip "simulated hosts unavailable here (see above)"
[ "$rc" -eq 0 ] || die "simhost_up failed"
tmp=$(mktemp -d /tmp/strata-mh-slurm-XXXXXX)
export SLURM_CONF="$tmp/slurm.conf"
pids=()
# shellcheck disable=SC2317  # runs from the traps
cleanup() {
  trap - EXIT INT TERM
  if [ -n "${slurmctld_up:-}" ]; then
    timeout 10 scancel --full --quiet --user=root 2> /dev/null
  fi
  simhost_down  # the slurmds and everything the jobs started
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do slurm_stop_pid "${pids[i]}"; done
  if [ "$failures" -eq 0 ]; then rm -rf "$tmp"; else echo "logs kept in $tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

reference_run "$tmp/reference.out" --model small --global-batch 4 --micro-batch 1 \
  --steps "$STEPS"

# slurmctld listens on the bridge, on a port free there; each slurmd has a
# network namespace to itself.
ctld_port=$(/usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$SIMHOST_BRIDGE_ADDR") ||
  die "cannot pick a free port on $SIMHOST_BRIDGE_ADDR"
slurmd_port=6818
strata_port=7078
slurm_start_munge "$tmp" || skip "$SLURM_LIB_ERROR"
{
  slurm_conf_common stratamh "$(hostname)" "$SIMHOST_BRIDGE_ADDR" "$ctld_port" \
    "$slurmd_port" "$tmp"
  echo "SelectType=select/linear"
  for i in 0 1; do
    echo "NodeName=${SIMHOST_NAME[i]} NodeAddr=${SIMHOST_ADDR[i]} CPUs=2 State=UNKNOWN"
  done
  echo "PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$SLURM_CONF"
slurmctld -D -f "$SLURM_CONF" > "$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmctld_up=1
for i in 0 1; do
  mkdir -p "$tmp/spool/${SIMHOST_NAME[i]}"
  # shellcheck disable=SC2086  # SIMHOST_NSENTER is a command prefix
  ${SIMHOST_NSENTER[i]} slurmd -D -f "$SLURM_CONF" > "$tmp/log/slurmd-h$i.out" 2>&1 &
  disown $!  # stopped by simhost_down with everything else on the host
done
if ! slurm_wait_idle 2; then
  tail -n 20 "$tmp/log/"* 2> /dev/null
  die "the two slurmds did not become idle within 60 s (logs above)"
fi
say "Slurm up: slurmctld on $SIMHOST_BRIDGE_ADDR:$ctld_port, slurmd on h0 and h1"

# srun reaches each host as itself.
# shellcheck disable=SC2016  # expanded by the task's shell
hosts=$(timeout 30 srun -N2 --ntasks-per-node=1 sh -c 'echo "$(hostname) $SLURMD_NODENAME"' 2>&1 | sort)
[ "$hosts" = "$(printf 'h0 h0\nh1 h1')" ] || fail "srun -N2 printed '$hosts', want h0 and h1"

cat > "$tmp/job.yaml" << YAML
name: multihost-slurm
global_batch: 4
constraints:
  tp: 2
  pp: 2
launch:
  command: [$TRAIN, --model, small, --global-batch, "4", --micro-batch, "1",
            --steps, "$STEPS"]
  ranks_per_node: 2
YAML
start=$SECONDS
# TMPDIR: each worker's default work directory, $TMPDIR/strata-<node>.
TMPDIR="$tmp" STRATA_BIN_DIR="$BUILD" STRATA_PORT="$strata_port" STRATA_STATE_DIR="$tmp/state" \
  STRATA_STARTUP_TIMEOUT=60 timeout -k 10 400 \
  sbatch --wait --nodes=2 --output="$tmp/job.out" "$SRC/deploy/slurm/strata.sbatch" \
  "$tmp/job.yaml" > "$tmp/sbatch.out" 2>&1 &
sbatch_pid=$!
checked=0
for _ in $(seq 1 4100); do  # at most ~410 s
  kill -0 "$sbatch_pid" 2> /dev/null || break
  if [ "$checked" -eq 0 ] && grep -q "step=2 loss=" "$tmp/job.out" 2> /dev/null; then
    check_rank_sockets 0 "tp=2 pp=2 over Slurm"
    check_rank_sockets 1 "tp=2 pp=2 over Slurm"
    checked=1
  fi
  sleep 0.1
done
wait "$sbatch_pid"
rc=$?
say "sbatch --wait exited $rc after $((SECONDS - start)) s"
[ "$rc" -eq 0 ] || fail "sbatch --wait exited $rc, want 0: $(cat "$tmp/sbatch.out")"
grep -q "SUCCEEDED" "$tmp/job.out" || fail "no SUCCEEDED in the job output"
workers=$(grep -o 'node(s), coordinator [^ ]*' "$tmp/job.out")
case "$workers" in
  *"tcp://h0:$strata_port"*) ;;
  *) fail "the coordinator endpoint is not h0's: '$workers'" ;;
esac
compare_losses "$tmp/reference.out" "$tmp/job.out" "tp=2 pp=2 over Slurm"
if [ "$failures" -gt 0 ]; then
  echo "--- job output"; cat "$tmp/job.out"
  echo "--- logs"; tail -n 20 "$tmp/state/"*.log 2> /dev/null
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

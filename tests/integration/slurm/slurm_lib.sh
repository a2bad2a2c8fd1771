# Shared by the Slurm tests (sourced): a private munged and the parts of a
# slurm.conf every test cluster has. Nothing under /etc is touched; every
# daemon runs as root under the caller's temporary directory, and its pid is
# appended to the caller's `pids` array so the caller's cleanup stops it.
# shellcheck shell=bash

# slurm_stop_pid PID: SIGTERM, SIGKILL after 10 s, reap.
slurm_stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2> /dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
}

# slurm_start_munge DIR: a munged with a fresh key, its socket at
# DIR/munge/munge.sock, logs in DIR/log. Returns 1 with the reason in
# SLURM_LIB_ERROR when it cannot start (the caller decides: skip or fail).
# Call it directly, not in $(...): the pid must reach the caller's `pids`.
slurm_start_munge() {
  local dir=$1
  mkdir -p "$dir/munge" "$dir/log"
  chmod 755 "$dir" "$dir/munge"  # munged wants search permission on its socket's path
  if ! mungekey --create --keyfile="$dir/munge/munge.key" > "$dir/log/mungekey.log" 2>&1; then
    SLURM_LIB_ERROR="mungekey failed: $(cat "$dir/log/mungekey.log")"
    return 1
  fi
  chmod 600 "$dir/munge/munge.key"
  munged --foreground --force --key-file="$dir/munge/munge.key" \
    --socket="$dir/munge/munge.sock" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
    > "$dir/log/munged.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 50); do [ -S "$dir/munge/munge.sock" ] && return 0; sleep 0.1; done
  SLURM_LIB_ERROR="munged did not start: $(tail -n 5 "$dir/log/munged.out")"
  return 1
}

# slurm_conf_common CLUSTER CTLD_NAME CTLD_ADDR CTLD_PORT SLURMD_PORT DIR:
# prints the slurm.conf lines shared by every test cluster (root daemons,
# munge through DIR's socket, state and logs under DIR, no accounting, no
# cgroups). Spool and pid files use %n, so several slurmds (one per
# simulated host) can share DIR. The caller adds SelectType, nodes and a
# partition.
slurm_conf_common() {
  local cluster=$1 ctld_name=$2 ctld_addr=$3 ctld_port=$4 slurmd_port=$5 dir=$6
  mkdir -p "$dir/ctld" "$dir/spool" "$dir/log"
  cat << CONF
ClusterName=$cluster
SlurmctldHost=$ctld_name($ctld_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/%n.slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/%n.slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
CONF
}

# slurm_wait_idle N: waits (at most 60 s) until sinfo shows N idle nodes;
# returns 1 otherwise.
slurm_wait_idle() {
  local want=$1 idle=0
  for _ in $(seq 1 120); do
    idle=$(timeout 5 sinfo -h -N -o %T 2> /dev/null | grep -c '^idle$')
    [ "$idle" -eq "$want" ] && return 0
    sleep 0.5
  done
  return 1
}

#!/usr/bin/env bash
# Simulated hosts on one machine, for tests that must see separate hosts.
#
# A simulated host is a network namespace plus a holder process that keeps
# its own UTS (hostname), IPC and mount namespaces alive; the mount namespace
# has a private tmpfs on /dev/shm, its own sysfs (its interfaces only) and
# an /etc/hosts (bind-mounted) listing every host of the instance. Hosts sit
# on one bridge in the root namespace (one address each, the bridge has
# .254), optionally with a tc token-bucket rate limit on each host's link
# (both directions). Everything else (/tmp,
# the build tree) is the same file system, like a shared one on a cluster.
#
# Each instance takes a free id ID (1..250) under a lock, so concurrent
# instances never collide: namespaces strata-sim<ID>-h<I>, bridge ssb<ID>,
# root-side links ssv<ID>h<I>, subnet 10.213.<ID>.0/24, host I at
# 10.213.<ID>.<I+1> with hostname h<I>, state in /run/strata-simhost/<ID>.
# Instances whose owner died are reclaimed by the next `up`.
#
# From a bash test (root needed):
#   source tests/simhost/simhost.sh
#   simhost_up 2 [RATE]       # e.g. RATE=1gbit; 77 when namespaces cannot
#                             # be created here (ctest SKIP), 1 on errors
#   simhost_exec 1 CMD ARGS   # runs CMD in host 1 (foreground, env kept)
#   simhost_rate 1 250mbit    # host 1's link slowed now ("none" lifts it)
#   "${SIMHOST_NSENTER[1]}" CMD &   # the same prefix as an array, for
#                             # background starts and MPMD command lines
#   simhost_down              # also run by the EXIT/INT/TERM trap that
#                             # simhost_up installs
# It sets SIMHOST_ID, SIMHOST_N, SIMHOST_DIR, SIMHOST_BRIDGE_ADDR,
# SIMHOST_NAME[i], SIMHOST_ADDR[i], SIMHOST_HOLDER[i], SIMHOST_NETNS[i],
# SIMHOST_IF (interface name inside every host: eth0), SIMHOST_SUBNET.
#
# By hand:
#   tests/simhost/simhost.sh up [N] [RATE]   # prints the instance id
#   tests/simhost/simhost.sh exec ID I CMD [ARGS...]
#   tests/simhost/simhost.sh list | down ID | down-all
# A manual instance lives until `down` or until its holders' lifetime
# (SIMHOST_LIFETIME seconds, default 7200) ends; the next `up` reclaims it.

# shellcheck disable=SC2016,SC2034  # sh -c scripts; variables for callers
SIMHOST_RUN=${SIMHOST_RUN:-/run/strata-simhost}
SIMHOST_IF=eth0
SIMHOST_LIFETIME=${SIMHOST_LIFETIME:-7200}

_simhost_say() { echo "simhost: $*" >&2; }

# Tears down instance ID from its state directory: kills every process in
# each host's network namespace (holders included), deletes the namespaces,
# links and bridge, removes the state. Idempotent, bounded.
_simhost_destroy() {
  local id=$1 dir="$SIMHOST_RUN/$1" ns pids i
  for ns in $(ip netns list 2> /dev/null | awk -v p="strata-sim$id-h" 'index($1, p) == 1 {print $1}'); do
    for i in $(seq 1 50); do
      pids=$(ip netns pids "$ns" 2> /dev/null)
      [ -z "$pids" ] && break
      # shellcheck disable=SC2086
      kill -KILL $pids 2> /dev/null
      sleep 0.1
    done
    [ -n "$pids" ] && _simhost_say "processes $pids in $ns did not die"
    ip netns del "$ns" 2> /dev/null
  done
  if [ -d "$dir" ]; then
    for i in "$dir"/holder.[0-9]*; do
      [ -f "$i" ] || continue
      kill -KILL "$(cat "$i")" 2> /dev/null
    done
  fi
  for i in $(ip -o link show 2> /dev/null | awk -F': ' -v p="ssv${id}h" 'index($2, p) == 1 {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$i" 2> /dev/null
  done
  ip link del "ssb$id" 2> /dev/null
  rm -rf "$dir"
}

# Prints a free instance id after creating its state directory; reclaims
# instances whose owner process is gone. Must run under the lock.
_simhost_allocate() {
  local id owner
  for id in $(seq 1 250); do
    if [ -d "$SIMHOST_RUN/$id" ]; then
      owner=$(cat "$SIMHOST_RUN/$id/owner" 2> /dev/null)
      if [ -n "$owner" ] && kill -0 "$owner" 2> /dev/null; then continue; fi
      _simhost_say "reclaiming instance $id (owner ${owner:-unknown} is gone)"
      _simhost_destroy "$id"
    fi
    if ip link show "ssb$id" > /dev/null 2>&1 ||
       ip -4 route show 2> /dev/null | grep -q "^10\.213\.$id\.0/24"; then
      continue  # in use by something that is not ours
    fi
    mkdir -p "$SIMHOST_RUN/$id" || return 1
    echo "$id"
    return 0
  done
  _simhost_say "no free instance id (250 in use)"
  return 1
}

# simhost_up N [RATE]: creates N hosts (see the top of this file).
simhost_up() {
  local n=${1:-2} rate=${2:-} i ns veth lock_fd
  if [ "$EUID" -ne 0 ]; then
    _simhost_say "needs root (network, UTS, IPC and mount namespaces)"
    return 77
  fi
  local b
  for b in ip nsenter unshare flock; do
    command -v "$b" > /dev/null || { _simhost_say "'$b' not installed"; return 77; }
  done
  mkdir -p "$SIMHOST_RUN" || return 77
  exec {lock_fd}> "$SIMHOST_RUN/lock"
  flock -w 60 "$lock_fd" || { _simhost_say "lock $SIMHOST_RUN/lock busy"; return 1; }
  SIMHOST_ID=$(_simhost_allocate)
  local rc=$?
  [ "$rc" -eq 0 ] && echo "${SIMHOST_OWNER:-$$}" > "$SIMHOST_RUN/$SIMHOST_ID/owner"
  flock -u "$lock_fd"
  exec {lock_fd}>&-
  [ "$rc" -eq 0 ] || return 1
  if [ -z "${SIMHOST_NO_TRAP:-}" ]; then
    trap simhost_down EXIT
    trap 'simhost_down; exit 130' INT
    trap 'simhost_down; exit 143' TERM
  fi
  SIMHOST_N=$n
  SIMHOST_DIR="$SIMHOST_RUN/$SIMHOST_ID"
  SIMHOST_SUBNET="10.213.$SIMHOST_ID.0/24"
  SIMHOST_BRIDGE_ADDR="10.213.$SIMHOST_ID.254"
  SIMHOST_NAME=() SIMHOST_ADDR=() SIMHOST_HOLDER=() SIMHOST_NETNS=() SIMHOST_NSENTER=()
  local br="ssb$SIMHOST_ID"

  # Namespaces first: failing here means this machine cannot run them (77).
  for ((i = 0; i < n; i++)); do
    ns="strata-sim$SIMHOST_ID-h$i"
    if ! ip netns add "$ns" 2> "$SIMHOST_DIR/err"; then
      _simhost_say "cannot create a network namespace: $(cat "$SIMHOST_DIR/err")"
      simhost_down
      return 77
    fi
    SIMHOST_NETNS[i]=$ns
    SIMHOST_NAME[i]="h$i"
    SIMHOST_ADDR[i]="10.213.$SIMHOST_ID.$((i + 1))"
  done
  {
    echo "127.0.0.1 localhost"
    for ((i = 0; i < n; i++)); do echo "${SIMHOST_ADDR[i]} ${SIMHOST_NAME[i]}"; done
    echo "$SIMHOST_BRIDGE_ADDR $(hostname)"
  } > "$SIMHOST_DIR/hosts"
  chmod 644 "$SIMHOST_DIR/hosts"

  if ! { ip link add "$br" type bridge &&
         ip addr add "$SIMHOST_BRIDGE_ADDR/24" dev "$br" &&
         ip link set "$br" up; } 2> "$SIMHOST_DIR/err"; then
    _simhost_say "cannot create bridge $br: $(cat "$SIMHOST_DIR/err")"
    simhost_down
    return 77
  fi
  for ((i = 0; i < n; i++)); do
    ns=${SIMHOST_NETNS[i]}
    veth="ssv${SIMHOST_ID}h$i"
    if ! { ip link add "$veth" type veth peer name "$SIMHOST_IF" netns "$ns" &&
           ip link set "$veth" master "$br" &&
           ip link set "$veth" up &&
           ip -n "$ns" link set lo up &&
           ip -n "$ns" addr add "${SIMHOST_ADDR[i]}/24" dev "$SIMHOST_IF" &&
           ip -n "$ns" link set "$SIMHOST_IF" up &&
           ip -n "$ns" route add default via "$SIMHOST_BRIDGE_ADDR"; } 2> "$SIMHOST_DIR/err"; then
      _simhost_say "cannot link host $i: $(cat "$SIMHOST_DIR/err")"
      simhost_down
      return 77
    fi
    if [ -n "$rate" ]; then
      if ! { tc qdisc add dev "$veth" root tbf rate "$rate" burst 256kb latency 100ms &&
             tc -n "$ns" qdisc add dev "$SIMHOST_IF" root tbf rate "$rate" burst 256kb \
               latency 100ms; } 2> "$SIMHOST_DIR/err"; then
        _simhost_say "cannot limit host $i's link to $rate: $(cat "$SIMHOST_DIR/err")"
        simhost_down
        return 1
      fi
    fi
    # The holder: own hostname, IPC, mounts (/dev/shm, /etc/hosts, and a
    # sysfs of its own network namespace, so /sys/class/net lists the
    # host's interfaces, not the machine's; the machine's cgroup tree is
    # moved onto the new sysfs, since slurmd needs /sys/fs/cgroup).
    rm -f "$SIMHOST_DIR/ready.$i"
    mkdir -p "$SIMHOST_DIR/cgroup.$i"
    nsenter --net="/var/run/netns/$ns" \
      unshare --uts --ipc --mount --propagation private \
      sh -c 'hostname "$1" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&
             mount --rbind /sys/fs/cgroup "$5" &&
             mount -t sysfs sysfs /sys && mount --move "$5" /sys/fs/cgroup &&
             mount --bind "$2" /etc/hosts && touch "$3" && exec sleep "$4"' \
      holder "${SIMHOST_NAME[i]}" "$SIMHOST_DIR/hosts" "$SIMHOST_DIR/ready.$i" \
      "$SIMHOST_LIFETIME" "$SIMHOST_DIR/cgroup.$i" \
      < /dev/null > "$SIMHOST_DIR/holder-log.$i" 2>&1 &
    SIMHOST_HOLDER[i]=$!
    disown "${SIMHOST_HOLDER[i]}"  # no job notice when teardown kills it
    echo "${SIMHOST_HOLDER[i]}" > "$SIMHOST_DIR/holder.$i"
  done
  for ((i = 0; i < n; i++)); do
    for _ in $(seq 1 100); do  # at most 10 s
      [ -f "$SIMHOST_DIR/ready.$i" ] && break
      kill -0 "${SIMHOST_HOLDER[i]}" 2> /dev/null || break
      sleep 0.1
    done
    if [ ! -f "$SIMHOST_DIR/ready.$i" ]; then
      _simhost_say "host $i's namespaces did not come up: $(cat "$SIMHOST_DIR/holder-log.$i")"
      simhost_down
      return 77
    fi
    SIMHOST_NSENTER[i]="nsenter -t ${SIMHOST_HOLDER[i]} --net --uts --ipc --mount --wd=$PWD"
    echo "${SIMHOST_NAME[i]} ${SIMHOST_ADDR[i]} ${SIMHOST_NETNS[i]} ${SIMHOST_HOLDER[i]}" \
      >> "$SIMHOST_DIR/hosts.list"
  done
  # Every host resolves and reaches the others: host i listens, host 0
  # connects by name.
  for ((i = 1; i < n; i++)); do
    if ! simhost_exec 0 /usr/bin/python3 -c '
import socket, sys, subprocess
name, nsenter = sys.argv[1], sys.argv[2:]
srv = subprocess.Popen(nsenter + ["/usr/bin/python3", "-c",
    "import socket; s = socket.create_server((\"0.0.0.0\", 7999)); s.settimeout(10); s.accept()"])
for _ in range(100):
    try:
        socket.create_connection((name, 7999), timeout=1).close()
        break
    except OSError:
        import time; time.sleep(0.05)
else:
    srv.kill(); sys.exit("cannot connect to %s:7999" % name)
srv.wait(10)' "${SIMHOST_NAME[i]}" nsenter -t "${SIMHOST_HOLDER[i]}" --net --uts --ipc --mount \
        > "$SIMHOST_DIR/err" 2>&1; then
      _simhost_say "host 0 cannot reach ${SIMHOST_NAME[i]}: $(cat "$SIMHOST_DIR/err")"
      simhost_down
      return 1
    fi
  done
  _simhost_say "instance $SIMHOST_ID: $n host(s) on $SIMHOST_SUBNET${rate:+, $rate per link}"
  return 0
}

# simhost_exec I CMD [ARGS...]: runs CMD inside host I, in the caller's
# working directory, with the caller's environment.
simhost_exec() {
  local i=$1
  shift
  nsenter -t "${SIMHOST_HOLDER[i]:?no host $i}" --net --uts --ipc --mount --wd="$PWD" "$@"
}

# simhost_coordinator BUILD DIR PORT [FLAGS...]: a strata-coordinator in
# host 0 listening on PORT (state in DIR/coordinator, log
# DIR/coordinator.log; --heartbeat-ms 500 unless FLAGS name one). Sets
# SIMHOST_ENDPOINT, the address every host reaches it at.
simhost_coordinator() {
  local build=$1 dir=$2 port=$3 heartbeat=(--heartbeat-ms 500)
  shift 3
  [[ " $* " == *" --heartbeat-ms "* ]] && heartbeat=()
  SIMHOST_ENDPOINT="tcp://${SIMHOST_NAME[0]}:$port"
  # shellcheck disable=SC2086  # SIMHOST_NSENTER is a command prefix
  ${SIMHOST_NSENTER[0]} "$build/coordinator/strata-coordinator" --state-dir "$dir/coordinator" \
    --listen "tcp://0.0.0.0:$port" "${heartbeat[@]}" "$@" > "$dir/coordinator.log" 2>&1 &
  disown $!  # simhost_down stops everything on the hosts
}

# simhost_worker BUILD DIR I [FLAGS...]: a strata-worker in host I joining
# SIMHOST_ENDPOINT (work dir DIR/work-h<I>, log DIR/worker-h<I>.log). No
# --address: the worker advertises its hostname, which every host resolves
# to that host's own address. Sets SIMHOST_WORKER_PID[I] (for fault tests).
simhost_worker() {
  local build=$1 dir=$2 i=$3
  shift 3
  # shellcheck disable=SC2086
  ${SIMHOST_NSENTER[i]} "$build/worker/strata-worker" --coordinator "${SIMHOST_ENDPOINT:?no coordinator}" \
    --work-dir "$dir/work-h$i" "$@" > "$dir/worker-h$i.log" 2>&1 &
  SIMHOST_WORKER_PID[i]=$!
  disown $!
}

# simhost_wait_workers BUILD N: waits at most ~30 s until N workers are
# registered and ready; SIMHOST_WORKERS holds `strata workers`' last table.
# Returns 1 naming how many registered otherwise.
simhost_wait_workers() {
  local build=$1 want=$2 n=0
  for _ in $(seq 1 60); do
    SIMHOST_WORKERS=$(simhost_exec 0 timeout 5 "$build/cli/strata" workers \
      --coordinator "$SIMHOST_ENDPOINT" 2> /dev/null)
    n=$(echo "$SIMHOST_WORKERS" | awk 'NR > 1 && $2 == "yes"' | wc -l)
    [ "$n" -ge "$want" ] && return 0
    sleep 0.5
  done
  _simhost_say "$n of $want workers registered within 30 s"
  return 1
}

# simhost_daemons BUILD DIR PORT: simhost_coordinator and a simhost_worker
# in every host, then simhost_wait_workers for all of them. The daemons
# keep the caller's environment (their ranks inherit it).
simhost_daemons() {
  local build=$1 dir=$2 port=$3 i
  simhost_coordinator "$build" "$dir" "$port"
  for ((i = 0; i < SIMHOST_N; i++)); do simhost_worker "$build" "$dir" "$i"; done
  simhost_wait_workers "$build" "$SIMHOST_N" || { _simhost_say "logs in $dir"; return 1; }
}

# simhost_rate I RATE: limits host I's link (both directions) to RATE (tc
# token bucket, e.g. 250mbit) while the instance runs, replacing any earlier
# limit; RATE "none" removes it. A slow link for fault tests.
simhost_rate() {
  local i=$1 rate=$2 veth="ssv${SIMHOST_ID:?no instance}h$1" ns=${SIMHOST_NETNS[$1]:?no host $1}
  tc qdisc del dev "$veth" root 2> /dev/null
  tc -n "$ns" qdisc del dev "$SIMHOST_IF" root 2> /dev/null
  [ "$rate" = none ] && return 0
  tc qdisc add dev "$veth" root tbf rate "$rate" burst 256kb latency 100ms &&
    tc -n "$ns" qdisc add dev "$SIMHOST_IF" root tbf rate "$rate" burst 256kb latency 100ms
}

# simhost_down: tears the instance down (safe to call more than once).
simhost_down() {
  [ -n "${SIMHOST_ID:-}" ] || return 0
  _simhost_destroy "$SIMHOST_ID"
  SIMHOST_ID=""
}

# Loads a running instance's state (for `exec` by hand).
_simhost_load() {
  local id=$1 name addr ns holder i=0
  SIMHOST_ID=$id
  SIMHOST_DIR="$SIMHOST_RUN/$id"
  [ -f "$SIMHOST_DIR/hosts.list" ] || { _simhost_say "no instance $id"; return 1; }
  while read -r name addr ns holder; do
    SIMHOST_NAME[i]=$name SIMHOST_ADDR[i]=$addr SIMHOST_NETNS[i]=$ns SIMHOST_HOLDER[i]=$holder
    i=$((i + 1))
  done < "$SIMHOST_DIR/hosts.list"
  SIMHOST_N=$i
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  cmd=${1:-}
  shift || true
  case "$cmd" in
    up)
      # The owner is host 0's holder: the instance counts as stale once the
      # holders are gone.
      SIMHOST_NO_TRAP=1 SIMHOST_OWNER=1
      simhost_up "${1:-2}" "${2:-}" || exit $?
      echo "${SIMHOST_HOLDER[0]}" > "$SIMHOST_DIR/owner"
      echo "$SIMHOST_ID"
      ;;
    exec)
      [ $# -ge 3 ] || { echo "usage: $0 exec ID I CMD [ARGS...]" >&2; exit 2; }
      _simhost_load "$1" || exit 1
      i=$2
      shift 2
      simhost_exec "$i" "$@"
      ;;
    down)
      [ $# -ge 1 ] || { echo "usage: $0 down ID" >&2; exit 2; }
      _simhost_destroy "$1"
      ;;
    down-all)
      for d in "$SIMHOST_RUN"/[0-9]*; do [ -d "$d" ] && _simhost_destroy "${d##*/}"; done
      ;;
    list)
      for d in "$SIMHOST_RUN"/[0-9]*; do
        [ -f "$d/hosts.list" ] || continue
        echo "instance ${d##*/} (owner $(cat "$d/owner" 2> /dev/null)):"
        sed 's/^/  /' "$d/hosts.list"
      done
      ;;
    *)
      echo "usage: $0 up [N] [RATE] | exec ID I CMD [ARGS...] | list | down ID | down-all" >&2
      exit 2
      ;;
  esac
fi

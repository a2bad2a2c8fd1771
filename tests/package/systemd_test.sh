#!/usr/bin/env bash
# deploy/systemd/ (docs/deploy.md, "Services"):
# 1. `systemd-analyze verify` accepts both units (ExecStart pointed at this
#    build's binaries, since verify checks that the program exists);
# 2. `systemd-analyze security --offline=yes` scores them at most
#    COORDINATOR_MAX / WORKER_MAX (thresholds justified in docs/deploy.md);
# 3. both daemons speak the Type=notify protocol the units rely on: started
#    as systemd would (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID), each sends
#    READY=1 and then WATCHDOG=1 at least every WatchdogSec/2.
# Usage: systemd_test.sh BUILD_DIR SOURCE_DIR. About 7 s.
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
# systemd-analyze's --threshold is in tenths of the printed score (0-100).
COORDINATOR_MAX=20  # 2.0
WORKER_MAX=40       # 4.0
command -v systemd-analyze > /dev/null || { echo "SKIP: systemd-analyze not installed"; exit 77; }
tmp=$(mktemp -d /tmp/strata-systemd-test-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for u in coordinator worker; do
  sed -e "s|/usr/bin/strata-coordinator|$build/coordinator/strata-coordinator|" \
      -e "s|/usr/bin/strata-worker|$build/worker/strata-worker|" \
      "$src/deploy/systemd/strata-$u.service" > "$tmp/strata-$u.service"
  systemd-analyze verify "$tmp/strata-$u.service" > "$tmp/verify-$u.log" 2>&1 \
    || { cat "$tmp/verify-$u.log"; fail "systemd-analyze verify strata-$u.service"; }
  [ ! -s "$tmp/verify-$u.log" ] || { cat "$tmp/verify-$u.log"; fail "verify warned about strata-$u.service"; }
done
echo "systemd-analyze verify: both units clean"
check_security() {  # $1 = unit, $2 = threshold
  local out score
  out=$(systemd-analyze security --offline=yes --threshold="$2" "$src/deploy/systemd/$1" 2>&1) \
    || { echo "$out" | grep -E '✗|Failed|exposure' | head -40; fail "$1 is more exposed than $2 (tenths)"; }
  score=$(echo "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
  echo "systemd-analyze security $1: $score (threshold $2 tenths)"
}
check_security strata-coordinator.service "$COORDINATOR_MAX"
check_security strata-worker.service "$WORKER_MAX"

# The notify protocol, with a socket standing in for systemd's.
cat > "$tmp/listen.py" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(0.2)
with open(sys.argv[2], "w") as out:
    end = time.monotonic() + float(sys.argv[3])
    while time.monotonic() < end:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            continue
        out.write(f"{time.monotonic():.3f} {msg!r}\n")
        out.flush()
PY
port=$((20000 + RANDOM % 20000))
notify() {  # $1 = name, rest = the daemon's command line
  local name=$1
  shift
  /usr/bin/python3 "$tmp/listen.py" "$tmp/$name.sock" "$tmp/$name.msgs" 6 &
  pids+=($!)
  for _ in $(seq 1 50); do [ -S "$tmp/$name.sock" ] && break; sleep 0.1; done
  # WatchdogSec=1: pings expected every 0.5 s.
  NOTIFY_SOCKET=$tmp/$name.sock WATCHDOG_USEC=1000000 \
    bash -c 'export WATCHDOG_PID=$$; exec "$@"' _ "$@" > "$tmp/$name.log" 2>&1 &
  pids+=($!)
}
notify coordinator "$build/coordinator/strata-coordinator" --listen "tcp://127.0.0.1:$port" \
  --state-dir "$tmp/state"
notify worker "$build/worker/strata-worker" --coordinator "tcp://127.0.0.1:$port" \
  --work-dir "$tmp/work" --node-name systemd-test
sleep 6
for name in coordinator worker; do
  msgs=$tmp/$name.msgs
  grep -q "'READY=1" "$msgs" || { cat "$tmp/$name.log" "$msgs"; fail "$name sent no READY=1"; }
  pings=$(grep -c "'WATCHDOG=1'" "$msgs" || true)
  [ "$pings" -ge 4 ] || { cat "$msgs"; fail "$name sent $pings WATCHDOG=1 (want >= 4 at WatchdogSec=1)"; }
  gap=$(awk "/WATCHDOG=1/ {if (prev) {d = \$1 - prev; if (d > m) m = d}; prev = \$1} END {printf \"%.2f\", m}" "$msgs")
  awk -v g="$gap" 'BEGIN {exit !(g < 0.75)}' || fail "$name: $gap s between two WATCHDOG=1 (want about 0.5)"
  echo "$name: READY=1, then $pings WATCHDOG=1 (largest gap $gap s)"
done
echo PASS

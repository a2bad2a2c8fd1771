#!/usr/bin/env bash
# The packaged units under a real systemd: a container whose init is
# systemd (deploy/container/build-image.sh --systemd), the strata packages
# installed. With /etc/strata/*.env written as an operator would,
#   systemctl enable --now strata-coordinator strata-worker
# must bring both to "active" with Status "serving" (Type=notify: READY=1),
# /var/lib/strata/{coordinator,worker} made by StateDirectory= for the
# units' dynamic users, and a strata-train job submitted with
# `strata submit --wait` must succeed under all the units' sandboxing.
# Then the watchdog: with WatchdogSec=2 (drop-in) a SIGSTOPped coordinator
# is killed by systemd and restarted (Restart=on-failure).
# Skipped (77) when the archive is unreachable on the first run or podman
# cannot start a systemd container here (saying why).
# Usage: systemd_container_test.sh BUILD_DIR SOURCE_DIR. About 40 s; 1.5 min
# when the image is rebuilt.
set -uo pipefail
build=$(realpath "${1:?usage: systemd_container_test.sh BUILD_DIR SOURCE_DIR}")
src=$(realpath "${2:?}")
source "$src/tests/package/debian_root.sh"
source "$src/tests/package/fresh_packages.sh"
command -v podman > /dev/null || { echo "FAIL: podman not installed (deploy/install-deps.sh test)"; exit 1; }
P=(podman --runtime runc --cgroup-manager=cgroupfs)
U=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
name=strata-sdct-$$
tmp=$(mktemp -d /tmp/strata-sdct-XXXXXX)
cleanup() {
  "${P[@]}" rm -f -t 0 "$name" > /dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  "${P[@]}" exec "$name" journalctl --no-pager -n 60 2>&1 | tail -60
  exit 1
}
start=$SECONDS
debian_base_tar "$build" > /dev/null || exit $?
fresh_packages "$build"
tag=$(cat "$build"/packages/strata_*.deb "$build"/packages/python3-strata_*.deb | sha256sum | cut -c1-12)
image=localhost/strata-test-systemd:$tag
if ! "${P[@]}" image exists "$image"; then
  "$src/deploy/container/build-image.sh" --systemd "$build/packages" "$image" "$build/deb-root" \
    > "$tmp/image.log" 2>&1 || {
      if is_network_failure "$tmp/image.log"; then
        echo "SKIP: Debian's archive is unreachable: $(grep -Em1 'Could not|Unable|Temporary' "$tmp/image.log")"; exit 77
      fi
      cat "$tmp/image.log"; echo "FAIL: building the image"; exit 1; }
  "${P[@]}" images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/strata-test-systemd:' \
    | grep -v ":$tag\$" | xargs -r "${P[@]}" rmi -f > /dev/null 2>&1
fi
echo "image $image ($((SECONDS - start)) s)"

if ! "${P[@]}" run -d --name "$name" --hostname node0 "${U[@]}" --network none \
  --systemd=always "$image" > "$tmp/run.log" 2>&1; then
  echo "SKIP: podman cannot start a systemd container here: $(tail -n 2 "$tmp/run.log")"; exit 77
fi
cin() { "${P[@]}" exec -i "$name" "$@"; }
state=""
for _ in $(seq 1 50); do  # at most ~10 s
  state=$(cin systemctl is-system-running 2> /dev/null)
  case "$state" in running | degraded) break ;; esac
  sleep 0.2
done
case "$state" in
  running | degraded) ;;
  *) echo "SKIP: systemd did not come up as the container's init (state '$state')"; exit 77 ;;
esac
echo "systemd in the container: $state"

cin sh -c 'cat > /etc/strata/coordinator.env' <<'ENV'
STRATA_COORDINATOR_LISTEN=tcp://127.0.0.1:5555
STRATA_COORDINATOR_ARGS=--heartbeat-ms 500
ENV
cin sh -c 'cat > /etc/strata/worker.env' <<'ENV'
STRATA_COORDINATOR=tcp://127.0.0.1:5555
STRATA_WORKER_ARGS=--address 127.0.0.1 --node-name node0
ENV
cin systemctl enable --now strata-coordinator strata-worker > "$tmp/enable.log" 2>&1 \
  || { cat "$tmp/enable.log"; fail "systemctl enable --now"; }
for u in strata-coordinator strata-worker; do
  [ "$(cin systemctl is-active "$u")" = active ] || fail "$u is not active"
  status=$(cin systemctl show -p StatusText --value "$u")
  [ "$status" = serving ] || fail "$u: StatusText '$status', want 'serving' (READY=1)"
  user=$(cin systemctl show -p MainPID --value "$u" | xargs -I{} "${P[@]}" exec "$name" stat -c %u /proc/{})
  echo "$u: active, Status: $status, runs as uid $user (DynamicUser=)"
done
cin sh -c 'ls -ld /var/lib/strata/coordinator/ /var/lib/strata/worker/ && test -d /var/lib/strata/coordinator/db' \
  || fail "StateDirectory= did not make /var/lib/strata/{coordinator,worker} with the coordinator's RocksDB"

ok=0
for _ in $(seq 1 40); do  # the worker registers within ~1 s
  cin strata workers --coordinator tcp://127.0.0.1:5555 2> /dev/null | awk 'NR > 1 && $2 == "yes"' | grep -q . && { ok=1; break; }
  sleep 0.25
done
[ "$ok" -eq 1 ] || fail "the worker did not register"
cin timeout 120 strata submit --coordinator tcp://127.0.0.1:5555 --wait --follow --nodes 1 \
  --ranks-per-node 2 -- strata-train --model tiny --steps 10 > "$tmp/job.out" 2>&1 \
  || { cat "$tmp/job.out"; fail "the job under the units failed"; }
grep -q 'step=10 loss=' "$tmp/job.out" || { cat "$tmp/job.out"; fail "no step=10 loss line"; }
echo "job under the units: $(grep -o 'step=10 loss=[0-9.]*' "$tmp/job.out" | head -1)"

# The watchdog: a stopped event loop is killed and restarted.
cin mkdir -p /etc/systemd/system/strata-coordinator.service.d
cin sh -c 'printf "[Service]\nWatchdogSec=2\n" > /etc/systemd/system/strata-coordinator.service.d/watchdog.conf'
cin systemctl daemon-reload
cin systemctl restart strata-coordinator
pid=$(cin systemctl show -p MainPID --value strata-coordinator)
cin sh -c "kill -STOP $pid"
restarted=0
for _ in $(seq 1 40); do  # WatchdogSec=2 + RestartSec=2: ~4 s
  sleep 0.25
  new=$(cin systemctl show -p MainPID --value strata-coordinator)
  if [ "$new" != "$pid" ] && [ "$new" != 0 ] && [ "$(cin systemctl is-active strata-coordinator)" = active ]; then
    restarted=1; break
  fi
done
[ "$restarted" -eq 1 ] || fail "systemd did not restart the stopped coordinator"
result=$(cin journalctl -u strata-coordinator --no-pager | grep -m1 -o 'Watchdog timeout[^.]*' || true)
[ -n "$result" ] || fail "no watchdog timeout in the journal"
echo "watchdog: '$result', restarted as pid $new"
echo "PASS in $((SECONDS - start)) s"

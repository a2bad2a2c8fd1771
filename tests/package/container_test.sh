#!/usr/bin/env bash
# strata in containers (docs/deploy.md, "Container"): the image built by
# deploy/container/build-image.sh from the .deb files on a Debian 12 base;
# one coordinator and two worker containers on their own podman network;
# `strata submit --wait` from the host (the build's CLI, to the
# coordinator's address on that network) runs strata-train on both workers,
# one worker container is killed at step 20, the job resumes from its
# checkpoint (a volume both workers mount) on the worker left, and every
# step's loss matches a single-process run of the same model.
# Podman needs this sandbox's three adjustments (runc + cgroupfs, lowered
# nofile/nproc limits). Skipped (77) when Debian's archive is unreachable
# on the first run, or when podman cannot start a container here (saying why).
# Usage: container_test.sh BUILD_DIR SOURCE_DIR. About 1 min; 2 min when the
# image is rebuilt (the .deb files changed).
set -uo pipefail
TEST_NAME=container_test
BUILD=$(realpath "${1:?usage: container_test.sh BUILD_DIR SOURCE_DIR}")
SRC=$(realpath "${2:?}")
source "$SRC/tests/integration/multihost/common.sh"
source "$SRC/tests/package/debian_root.sh"
source "$SRC/tests/package/fresh_packages.sh"
need_bins cli/strata runtime/strata-train
command -v podman > /dev/null || die "podman not installed (deploy/install-deps.sh test)"
P=(podman --runtime runc --cgroup-manager=cgroupfs)
U=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
STEPS=150
KILL_AT=20
id=$$
net=strata-ct-$id
tmp=$(mktemp -d /tmp/strata-container-test-XXXXXX)
chmod 777 "$tmp"
cleanup() {
  trap - EXIT INT TERM
  "${P[@]}" rm -f -t 0 "strata-ct-coord-$id" "strata-ct-w0-$id" "strata-ct-w1-$id" > /dev/null 2>&1
  "${P[@]}" network rm -f "$net" > /dev/null 2>&1
  if [ "${failures:-0}" -eq 0 ]; then rm -rf "$tmp"; else echo "logs kept in $tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start=$SECONDS

# The image, rebuilt only when the packages change (tagged by their hash).
debian_base_tar "$BUILD" > /dev/null || exit $?
fresh_packages "$BUILD"
tag=$(cat "$BUILD"/packages/strata_*.deb "$BUILD"/packages/python3-strata_*.deb | sha256sum | cut -c1-12)
image=localhost/strata-test:$tag
if ! "${P[@]}" image exists "$image"; then
  "$SRC/deploy/container/build-image.sh" "$BUILD/packages" "$image" "$BUILD/deb-root" \
    > "$tmp/image.log" 2>&1 || {
      if is_network_failure "$tmp/image.log"; then skip "Debian's archive is unreachable: $(grep -Em1 'Could not|Unable|Temporary' "$tmp/image.log")"; fi
      cat "$tmp/image.log"; die "building the image"; }
  # Older test images are garbage now.
  "${P[@]}" images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/strata-test:' \
    | grep -v ":$tag\$" | xargs -r "${P[@]}" rmi -f > /dev/null 2>&1
fi
say "image $image: $("${P[@]}" image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}') ($((SECONDS - start)) s)"
if ! "${P[@]}" run --rm "${U[@]}" --network none "$image" strata --help > "$tmp/probe.log" 2>&1; then
  skip "podman cannot run a container here: $(tail -n 2 "$tmp/probe.log")"
fi

reference_run "$tmp/reference.out" --model tiny --steps "$STEPS"

# Fixed addresses on the test's own subnet: container names resolve only
# where podman runs a DNS server for the network (netavark + aardvark-dns,
# or CNI's dnsname plugin), which this test does not require.
subnet=10.213.$((id % 250)).0/24
pre=${subnet%.0/24}
"${P[@]}" network create --subnet "$subnet" "$net" > /dev/null || die "podman network create"
mkdir -m 777 "$tmp/ckpt"
hosts=(--add-host "coord:$pre.10" --add-host "node0:$pre.11" --add-host "node1:$pre.12")
"${P[@]}" run -d --name "strata-ct-coord-$id" --hostname coord "${U[@]}" --network "$net" \
  --ip "$pre.10" "${hosts[@]}" "$image" \
  strata-coordinator --listen tcp://0.0.0.0:5555 --state-dir /var/lib/strata/coordinator \
  --heartbeat-ms 500 > /dev/null || die "starting the coordinator container"
for i in 0 1; do
  "${P[@]}" run -d --name "strata-ct-w$i-$id" --hostname "node$i" "${U[@]}" --network "$net" \
    --ip "$pre.1$((i + 1))" "${hosts[@]}" --shm-size 256m -v "$tmp/ckpt:/ckpt" "$image" \
    strata-worker --coordinator "tcp://coord:5555" --work-dir /var/lib/strata/worker \
    > /dev/null || die "starting worker container $i"
done
endpoint=tcp://$pre.10:5555
say "coordinator at $endpoint (reached from the host over the podman bridge)"
workers=""
for _ in $(seq 1 60); do  # at most ~30 s
  workers=$(timeout 5 "$BUILD/cli/strata" workers --coordinator "$endpoint" 2> /dev/null)
  [ "$(echo "$workers" | awk 'NR > 1 && $2 == "yes"' | wc -l)" -ge 2 ] && break
  sleep 0.5
done
echo "$workers"
[ "$(echo "$workers" | awk 'NR > 1 && $2 == "yes"' | wc -l)" -ge 2 ] || {
  "${P[@]}" logs "strata-ct-coord-$id" | tail -20
  die "2 worker containers did not register within 30 s"; }

cat > "$tmp/job.yaml" << YAML
name: container-test
launch:
  command: [strata-train, --model, tiny, --steps, "$STEPS", --ckpt-every, "10", --resume]
  nodes: 2
  ranks_per_node: 1
  min_nodes: 1
  max_restarts: 1
  worker_wait_s: 30
  checkpoint_uri: file:///ckpt
YAML
t0=$SECONDS
timeout -k 5 300 "$BUILD/cli/strata" submit --coordinator "$endpoint" --wait --follow \
  "$tmp/job.yaml" > "$tmp/job.out" 2>&1 &
submit_pid=$!
killed=0
for _ in $(seq 1 3000); do  # at most ~300 s
  kill -0 "$submit_pid" 2> /dev/null || break
  if [ "$killed" -eq 0 ] && grep -q "step=$KILL_AT loss=" "$tmp/job.out"; then
    say "step $KILL_AT after $((SECONDS - t0)) s: podman kill the container of node1"
    "${P[@]}" kill "strata-ct-w1-$id" > /dev/null
    killed=1
  fi
  sleep 0.1
done
wait "$submit_pid"
rc=$?
say "strata submit --wait exited $rc after $((SECONDS - t0)) s"
[ "$killed" -eq 1 ] || fail "the job never reported step $KILL_AT"
[ "$rc" -eq 0 ] || fail "strata submit --wait exited $rc, want 0"
resumed=$(sed -n 's/.*resumed step=\([0-9]*\).*/\1/p' "$tmp/job.out" | head -n 1)
if [ -z "$resumed" ]; then
  fail "no 'resumed step=' line: the job did not resume"
else
  say "resumed at step $resumed on the worker container left"
fi
grep -q "step=$STEPS loss=" "$tmp/job.out" || fail "the job never reached step $STEPS"
compare_losses "$tmp/reference.out" "$tmp/job.out" "both attempts"
if [ "$failures" -gt 0 ]; then
  echo "--- job output"; cat "$tmp/job.out"
  echo "--- coordinator"; "${P[@]}" logs "strata-ct-coord-$id" 2>&1 | tail -30
  exit 1
fi
say "PASS in $((SECONDS - start)) s"

#!/usr/bin/env bash
# The simulated-host harness itself (tests/simhost/simhost.sh): two hosts
# with a 200 Mbit/s link limit must be separate machines in every way the
# strata processes can see — hostname, /dev/shm, System V IPC, network
# interfaces (sysfs), addresses that resolve by name on both — and the
# limit must hold: `strata probe --peer` across the link measures at most
# 1.25x the limit and at least a quarter of it. Teardown must leave no
# namespace behind.
#
#   simhost_test.sh BUILD_DIR SOURCE_DIR        (ctest: multihost_simhost_test)
set -uo pipefail
TEST_NAME=multihost_simhost_test
BUILD=${1:?usage: simhost_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: simhost_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"
need_bins cli/strata
RATE_MBIT=200

simhost_up 2 "${RATE_MBIT}mbit"
rc=$?
[ "$rc" -eq 77 ] && skip "simulated hosts unavailable here (see above)"
[ "$rc" -eq 0 ] || die "simhost_up failed"
ns0=${SIMHOST_NETNS[0]}

# Hostnames.
for i in 0 1; do
  got=$(simhost_exec "$i" hostname)
  [ "$got" = "${SIMHOST_NAME[i]}" ] || fail "host $i: hostname '$got', want ${SIMHOST_NAME[i]}"
done
[ "$(hostname)" != "${SIMHOST_NAME[0]}" ] || fail "the root namespace took host 0's name"

# /dev/shm and System V IPC are private to each host.
simhost_exec 0 sh -c 'echo h0 > /dev/shm/strata-simhost-test'
simhost_exec 1 test -e /dev/shm/strata-simhost-test &&
  fail "a file in h0's /dev/shm is visible in h1"
[ -e /dev/shm/strata-simhost-test ] && fail "a file in h0's /dev/shm is visible in the root namespace"
key=$(simhost_exec 0 ipcmk -M 4096 | awk '{print $NF}')
simhost_exec 1 ipcs -m | grep -qw "$key" && fail "h0's shared-memory segment $key is visible in h1"

# Each host sees only its own interfaces, and every host's name resolves to
# its address on the other host.
nets=$(simhost_exec 0 ls /sys/class/net | sort | tr '\n' ' ')
[ "$nets" = "$SIMHOST_IF lo " ] || fail "h0 sees interfaces '$nets', want '$SIMHOST_IF lo'"
for i in 0 1; do
  other=$((1 - i))
  got=$(simhost_exec "$i" getent ahostsv4 "${SIMHOST_NAME[other]}" | awk 'NR == 1 {print $1}')
  [ "$got" = "${SIMHOST_ADDR[other]}" ] ||
    fail "in ${SIMHOST_NAME[i]}, ${SIMHOST_NAME[other]} resolves to '$got', want ${SIMHOST_ADDR[other]}"
done

# The link limit, measured with strata's own peer probe.
port=7411
simhost_exec 1 timeout 60 "$BUILD/cli/strata" probe --serve-peer "$port" > /dev/null 2>&1 &
sleep 1
probe=$(simhost_exec 0 timeout 60 "$BUILD/cli/strata" probe --peer "${SIMHOST_NAME[1]}:$port" 2>&1)
gbps=$(echo "$probe" | grep -o '"peer_gbps":[0-9.eE+-]*' | cut -d: -f2)
wait
if [ -z "$gbps" ]; then
  fail "strata probe --peer measured nothing: $(echo "$probe" | tail -n 3)"
else
  verdict=$(awk -v g="$gbps" -v r="$RATE_MBIT" 'BEGIN {
    m = g * 1000; print (m <= 1.25 * r && m >= 0.25 * r) ? "ok" : "bad" }')
  if [ "$verdict" = ok ]; then
    say "h0 -> h1 measured $(awk -v g="$gbps" 'BEGIN {printf "%.0f", g * 1000}') Mbit/s under a ${RATE_MBIT} Mbit/s limit"
  else
    fail "h0 -> h1 measured $gbps Gbit/s under a ${RATE_MBIT} Mbit/s limit"
  fi
fi

simhost_down
ip netns list | grep -q "^$ns0\b" && fail "namespace $ns0 left after simhost_down"
[ "$failures" -eq 0 ] || exit 1
say "PASS"

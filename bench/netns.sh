#!/usr/bin/env bash
# Two simulated nodes for strata-bench comm-hier: network namespaces
# strata-a and strata-b joined by a veth pair (10.77.0.1 <-> 10.77.0.2),
# each direction limited to RATE (default 1gbit) by a tc token-bucket filter.
# Link delay needs the netem qdisc, which this kernel lacks; when netem is
# present DELAY (e.g. 0.5ms) is added too. Needs root (CAP_NET_ADMIN).
# Traffic stays inside the namespaces created here.
#   bench/netns.sh up [RATE] [DELAY] | down | status
set -euo pipefail
cmd=${1:-status}
rate=${2:-1gbit}
delay=${3:-}
case "$cmd" in
  up)
    "$0" down >/dev/null 2>&1 || true
    ip netns add strata-a
    ip netns add strata-b
    ip link add strata-va type veth peer name strata-vb
    ip link set strata-va netns strata-a
    ip link set strata-vb netns strata-b
    ip -n strata-a addr add 10.77.0.1/24 dev strata-va
    ip -n strata-b addr add 10.77.0.2/24 dev strata-vb
    for ns in strata-a strata-b; do ip -n $ns link set lo up; done
    ip -n strata-a link set strata-va up
    ip -n strata-b link set strata-vb up
    for pair in strata-a:strata-va strata-b:strata-vb; do
      ns=${pair%%:*}; dev=${pair##*:}
      if [ -n "$delay" ] && tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" 2>/dev/null; then
        tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$rate" burst 256kb latency 100ms
      else
        tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 256kb latency 100ms
      fi
    done
    echo "netns up: strata-a(10.77.0.1) <-> strata-b(10.77.0.2), $rate ${delay:+delay $delay}"
    ;;
  down)
    ip netns del strata-a 2>/dev/null || true
    ip netns del strata-b 2>/dev/null || true
    ;;
  status)
    ip netns list | grep strata- || echo "no strata namespaces"
    ;;
  *) echo "usage: $0 up [RATE] [DELAY] | down | status" >&2; exit 2 ;;
esac

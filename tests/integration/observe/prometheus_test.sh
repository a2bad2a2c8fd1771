#!/usr/bin/env bash
# A real Prometheus server (Debian `prometheus`) scrapes a running
# coordinator's /metrics and answers PromQL about it through its HTTP API.
#
#   prometheus_test.sh BUILD_DIR            (ctest: prometheus_scrape_test)
#
# 1. strata-coordinator with --metrics-listen 127.0.0.1:0 and one worker.
# 2. prometheus scraping it every second (its own config and TSDB in a
#    temporary directory, loopback only).
# 3. `strata_workers{state="alive"}` is 1 through /api/v1/query, and the
#    target is up; the scrape duration Prometheus measured is printed.
# Exit 77 (ctest SKIP) when prometheus is not installed.
set -uo pipefail
BUILD=${1:?usage: prometheus_test.sh BUILD_DIR}
command -v prometheus > /dev/null || { echo "SKIP: prometheus is not installed"; exit 77; }
tmp=$(mktemp -d /tmp/strata-prom-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }

"$BUILD/coordinator/strata-coordinator" --state-dir "$tmp/state" \
  --listen tcp://127.0.0.1:0 --metrics-listen 127.0.0.1:0 --heartbeat-ms 200 \
  > "$tmp/coordinator.out" 2> "$tmp/coordinator.log" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^listening' "$tmp/coordinator.out" && break; sleep 0.1; done
endpoint=$(awk '/^listening/ {print $2}' "$tmp/coordinator.out")
metrics=$(awk '/^metrics/ {print $2}' "$tmp/coordinator.out")
[ -n "$endpoint" ] && [ -n "$metrics" ] || fail "coordinator did not start"
"$BUILD/worker/strata-worker" --coordinator "$endpoint" --node-name n0 \
  --address 127.0.0.1 --work-dir "$tmp/w0" > "$tmp/worker.log" 2>&1 &
pids+=($!)

target=${metrics#http://}
target=${target%/metrics}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$tmp/prometheus.yml" << YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: strata
    static_configs:
      - targets: ["$target"]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$port" > "$tmp/prometheus.log" 2>&1 &
pids+=($!)

query() {
  curl -s --max-time 2 "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2> /dev/null
}
alive=""
for _ in $(seq 1 60); do  # at most ~30 s
  alive=$(query 'strata_workers{state="alive"}')
  [ "$alive" = "1" ] && break
  sleep 0.5
done
[ "$alive" = "1" ] || fail "strata_workers{state=\"alive\"} = '$alive' through Prometheus, want 1"
up=$(query 'up{job="strata"}')
[ "$up" = "1" ] || fail "up{job=\"strata\"} = '$up'"
writable=$(query 'strata_coordinator_state_writable')
[ "$writable" = "1" ] || fail "strata_coordinator_state_writable = '$writable'"
echo "scrape duration measured by Prometheus: $(query 'scrape_duration_seconds{job="strata"}') s"
echo "PASS"

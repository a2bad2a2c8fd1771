#!/usr/bin/env bash
# The coordinator's web dashboard in a real browser (Debian's
# chromium-headless-shell) against a running `strata run`:
#
#   dashboard_test.sh BUILD_DIR ARTIFACT_DIR      (ctest: dashboard_test)
#
# 1. `strata run --dashboard 127.0.0.1:0` of strata-train --model tiny on
#    two local nodes and a hot spare (--spares 1); the printed URL is used
#    once the job passed step 30.
# 2. /api/dashboard.json lists the job RUNNING with progress, goodput, a
#    curve and a heat map with cells, its spare reserved, and the idle
#    pool with that worker reserved for it.
# 3. Chromium loads the page (virtual time, so the page polls and draws):
#    the DOM has the job, its progress text, heat-map cells, the
#    goodput line, its spares line and the idle pool, the page's error box is empty and the browser logged
#    no console error; a screenshot goes to ARTIFACT_DIR/dashboard.png.
# 4. "download trace" (/api/trace.json?job=) returns a trace with the
#    job's steps; bad requests get 4xx: no job, an unknown job, POST and
#    DELETE, an unknown path and a huge query string.
# Exit 77 (ctest SKIP) when chromium-headless-shell is not installed.
set -uo pipefail
BUILD=${1:?usage: dashboard_test.sh BUILD_DIR ARTIFACT_DIR}
ARTIFACTS=${2:?usage: dashboard_test.sh BUILD_DIR ARTIFACT_DIR}
CHROME=$(command -v chromium-headless-shell || command -v chromium)
[ -n "$CHROME" ] || { echo "SKIP: chromium-headless-shell is not installed"; exit 77; }
tmp=$(mktemp -d /tmp/strata-dash-XXXXXX)
run_pid=""
cleanup() {
  [ -n "$run_pid" ] && kill -INT "$run_pid" 2> /dev/null && wait "$run_pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
die() { echo "FAIL: $*"; tail -n 20 "$tmp/run.err"; exit 1; }

"$BUILD/cli/strata" run --dashboard 127.0.0.1:0 --plaintext --nodes 2 \
  --ranks-per-node 1 --spares 1 -- "$BUILD/runtime/strata-train" --model tiny \
  --global-batch 8 --micro-batch 2 --steps 200000 > "$tmp/run.out" 2> "$tmp/run.err" &
run_pid=$!
url=""
for _ in $(seq 1 300); do  # at most ~60 s
  url=$(sed -n 's/^\[strata\] dashboard //p' "$tmp/run.err" | head -n 1)
  [ -n "$url" ] && grep -q "step=30 loss=" "$tmp/run.out" "$tmp/run.err" 2> /dev/null && break
  kill -0 "$run_pid" 2> /dev/null || die "strata run ended early"
  sleep 0.2
done
[ -n "$url" ] || die "strata run printed no dashboard URL"
grep -q "step=30 loss=" "$tmp/run.out" "$tmp/run.err" || die "the job did not reach step 30"
echo "dashboard at $url"

# The coordinator hears of steps through telemetry, a few steps behind
# what the rank prints (tiny's steps take ~5 ms): poll, at most ~10 s.
check_dash() {
  /usr/bin/python3 - "$tmp/dash.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
jobs = [j for j in d["jobs"] if j["state"] == "RUNNING"]
assert jobs, "no RUNNING job"
j = jobs[0]
det = d["detail"][j["id"]]
assert j["progress"]["step"] >= 30, j["progress"]
assert 0 < j["goodput"]["ratio"] <= 1, j["goodput"]
assert len(det["curve"]) >= 10, "curve has %d points" % len(det["curve"])
hm = det["heatmap"]
assert len(hm["ranks"]) == 2 and len(hm["steps"]) >= 10, hm["ranks"]
assert len(d["workers"]) == 3
assert j["spares"]["want"] == 1 and len(j["spares"]["reserved"]) == 1, j["spares"]
spare = j["spares"]["reserved"][0]
assert d["pool"]["reserved"] == {spare: j["id"]}, d["pool"]
assert "1 reserved as spares" in d["pool"]["text"], d["pool"]
print(j["id"])
PY
}
job=""
for _ in $(seq 1 50); do
  curl -s --max-time 10 "${url}api/dashboard.json" > "$tmp/dash.json" || fail "GET /api/dashboard.json failed"
  job=$(check_dash 2> "$tmp/dash.err") && break
  job=""
  sleep 0.2
done
[ -n "$job" ] || fail "dashboard JSON is incomplete: $(cat "$tmp/dash.err") $(head -c 600 "$tmp/dash.json")"
echo "job $job"

mkdir -p "$ARTIFACTS"
chrome() {
  timeout -k 5 60 "$CHROME" --headless --no-sandbox --disable-gpu \
    --enable-logging=stderr --v=0 --virtual-time-budget=6000 \
    --window-size=1280,1800 "$@" "$url" 2>> "$tmp/chrome.log"
}
chrome --dump-dom > "$tmp/dom.html" || fail "chromium --dump-dom exited $?"
chrome --screenshot="$ARTIFACTS/dashboard.png" > /dev/null || fail "chromium --screenshot exited $?"
[ -s "$ARTIFACTS/dashboard.png" ] || fail "no screenshot"
/usr/bin/python3 - "$tmp/dom.html" "$job" << 'PY' || fail "the page did not render the job"
import re, sys
dom, job = open(sys.argv[1]).read(), sys.argv[2]
assert 'data-loaded="1"' in dom, "the page never loaded /api/dashboard.json"
assert 'data-job="%s"' % job in dom, "job row missing"
assert re.search(r'<div id="progress">step \d+', dom), "no progress line"
cells = len(re.findall(r'class="cell"', dom))
assert cells >= 20, "heat map has %d cells" % cells
assert "Goodput: " in dom and "% of " in dom, "no goodput"
assert re.search(r'<div id="spares">spares 1 of 1 reserved \[w-node-\d\]', dom), "no spares line"
assert re.search(r'<div id="pool" class="muted">idle pool: 1 idle: 0 free \[\], 1 reserved as spares \[w-node-\d for %s\]' % job, dom), "no idle pool"
assert "spare for %s" % job in dom, "the spare is not marked in the workers table"
errors = re.search(r'<span id="errors">(.*?)</span>', dom, re.S)
assert errors is not None and errors.group(1).strip() == "", "page errors: %s" % errors.group(1)
print("page: job row, progress, %d heat-map cells, goodput, spares, idle pool" % cells)
PY
if grep -E "Uncaught|CONSOLE.*(error|Error)|:ERROR:.*console" "$tmp/chrome.log"; then
  fail "the browser logged console errors (above)"
fi

code() { curl -s -o "$tmp/body" -w '%{http_code}' --max-time 15 "$@"; }
[ "$(code "${url}api/trace.json?job=$job")" = 200 ] || fail "trace download: $(head -c 300 "$tmp/body")"
/usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["traceEvents"]
steps = [e for e in t if e.get("ph") == "X" and e.get("cat") == "step"]
colls = [e for e in t if e.get("ph") == "X" and e.get("cat") == "collective"]
assert len(steps) >= 50 and colls, (len(steps), len(colls))
print("trace download: %d step spans, %d collectives" % (len(steps), len(colls)))
' "$tmp/body" || fail "the downloaded trace lacks steps or collectives"
[ "$(code "${url}api/trace.json")" = 400 ] || fail "trace without a job: not 400"
[ "$(code "${url}api/trace.json?job=job-999")" = 404 ] || fail "trace of an unknown job: not 404"
post=$(code -X POST -d x "${url}")
case $post in 4??) ;; *) fail "POST /: $post, want a 4xx" ;; esac
[ "$(code -X DELETE "${url}")" = 405 ] || fail "DELETE /: not 405"
[ "$(code "${url}nope")" = 404 ] || fail "GET /nope: not 404"
[ "$(code "${url}api/dashboard.json?x=$(head -c 6000 /dev/zero | tr '\0' a)")" = 414 ] ||
  fail "a 6 KB query string: not 414"

kill -INT "$run_pid"
wait "$run_pid"
run_pid=""
[ "$failures" -eq 0 ] || { echo "dashboard_test: $failures check(s) failed"; tail -n 20 "$tmp/chrome.log"; exit 1; }
echo "dashboard_test: all checks passed; screenshot $ARTIFACTS/dashboard.png"

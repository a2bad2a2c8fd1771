# Shared by the multi-host tests (sourced): checks, the single-process
# reference run and the loss comparison. Each test sets TEST_NAME, BUILD and
# SRC before sourcing this file.
# shellcheck shell=bash

SKIP=77
failures=0
skip() { echo "SKIP $TEST_NAME: $*"; exit "$SKIP"; }
fail() { echo "FAIL $TEST_NAME: $*"; failures=$((failures + 1)); }
die() { echo "FAIL $TEST_NAME: $*"; exit 1; }
say() { echo "$TEST_NAME: $*"; }

TRAIN="$BUILD/runtime/strata-train"

# need_bins PATH...: every path (relative to BUILD) is built, else FAIL.
need_bins() {
  local b
  for b in "$@"; do [ -x "$BUILD/$b" ] || die "$BUILD/$b not built"; done
}

# Relative loss tolerance between a distributed run and one process.
LOSS_RTOL=1e-6

# reference_run OUT ARGS...: strata-train in one process (no store), the
# losses every distributed run of the test must reproduce.
reference_run() {
  local out=$1
  shift
  env -u STRATA_STORE -u RANK -u WORLD_SIZE -u STRATA_TP -u STRATA_PP \
    timeout -k 5 300 "$TRAIN" "$@" > "$out" 2>&1 ||
    die "single-process reference run failed: $(tail -n 5 "$out")"
}

# compare_losses REF GOT LABEL [FIRST_STEP [LAST_STEP]]: every
# `step=N loss=X` line of GOT (any prefix; a step may appear more than once,
# e.g. before and after a restart) must match REF's step N within LOSS_RTOL,
# and GOT must cover every step from FIRST_STEP (default 1) to LAST_STEP
# (default REF's last). Prints the largest relative gap.
compare_losses() {
  local ref=$1 got=$2 label=$3 first=${4:-1} upto=${5:-0} report
  report=$(awk -v rtol="$LOSS_RTOL" -v first="$first" -v upto="$upto" '
    function grab(line,   s, l) {
      if (!match(line, /step=[0-9]+ loss=[-0-9.eE+naif]+/)) return 0
      split(substr(line, RSTART, RLENGTH), kv, /[= ]/)
      gs = kv[2] + 0; gl = kv[4]
      return 1
    }
    FNR == NR { if (grab($0)) { ref[gs] = gl; if (gs > last) last = gs }; next }
    grab($0) {
      n++
      seen[gs] = 1
      if (!(gs in ref)) { printf "step %d is not in the reference\n", gs; bad++; next }
      d = gl - ref[gs]; if (d < 0) d = -d
      r = ref[gs] + 0; if (r < 0) r = -r
      rel = r > 0 ? d / r : d
      if (rel > worst) worst = rel
      if (rel > rtol) {
        printf "step %d: loss %s, reference %s (relative gap %.3g)\n", gs, gl, ref[gs], rel
        bad++
      }
    }
    END {
      if (upto > 0) last = upto
      for (s = first; s <= last; s++) if (!(s in seen)) { printf "step %d missing\n", s; bad++ }
      if (n == 0) { print "no step=N loss=X lines"; bad++ }
      printf "RESULT %d %d %.3g\n", n, bad + 0, worst + 0
    }' "$ref" "$got")
  local result n bad worst
  result=$(echo "$report" | sed -n 's/^RESULT //p')
  read -r n bad worst <<< "$result"
  echo "$report" | grep -v '^RESULT ' | sed "s/^/  $label: /"
  if [ "${bad:-1}" -ne 0 ]; then
    fail "$label: losses differ from the single-process run (rtol $LOSS_RTOL)"
  else
    say "$label: $n losses equal the single-process run's, max relative gap $worst"
  fi
}

# check_rank_sockets I LABEL: while the job runs, no TCP socket (listening
# or connected) of a strata process in simulated host I is on a loopback
# address, and host I's strata-train ranks hold connections to the other
# hosts' addresses (ss -tanp lists sockets with their processes).
check_rank_sockets() {
  local i=$1 label=$2 socks bad remote
  socks=$(simhost_exec "$i" ss -tanpH 2> /dev/null | grep -E '"strata[^"]*"' || true)
  bad=$(echo "$socks" | awk '$4 ~ /^127\./ || $4 ~ /^\[::1\]/ || $5 ~ /^127\./' || true)
  if [ -n "$bad" ]; then
    fail "$label: strata sockets on loopback in ${SIMHOST_NAME[i]}: $bad"
  fi
  remote=$(echo "$socks" | grep strata-train |
           awk -v me="${SIMHOST_ADDR[i]}:" '$1 == "ESTAB" && index($5, me) != 1' | wc -l)
  if [ "$remote" -eq 0 ]; then
    fail "$label: no strata-train rank in ${SIMHOST_NAME[i]} is connected to another host"
  else
    say "$label: ${SIMHOST_NAME[i]}'s ranks hold $remote connection(s) to other hosts, none on loopback"
  fi
}

# multihost_begin N RATE NAME: N simulated hosts (RATE their links' tc
# limit, "" for none; SKIP when they cannot be created) and a fresh log
# directory $tmp (/tmp/strata-NAME-XXXXXX, readable by the ranks' users).
# At exit the hosts go down (with every process on them) and $tmp is
# removed unless a check failed or KEEP_LOGS is set. A test with more to
# tear down sets MULTIHOST_CLEANUP to a function run first.
multihost_begin() {
  local n=$1 rate=$2 name=$3 rc
  simhost_up "$n" "$rate"
  rc=$?
  [ "$rc" -eq 77 ] && skip "simulated hosts unavailable here (see above)"
  [ "$rc" -eq 0 ] || die "simhost_up failed"
  tmp=$(mktemp -d "/tmp/strata-$name-XXXXXX")
  chmod 755 "$tmp"
  trap multihost_end EXIT
  trap 'exit 130' INT TERM
  unset STRATA_CURVE_DIR
}

# shellcheck disable=SC2317  # runs from the EXIT trap
multihost_end() {
  trap - EXIT INT TERM
  [ -n "${MULTIHOST_CLEANUP:-}" ] && "$MULTIHOST_CLEANUP"
  simhost_down
  if [ "$failures" -eq 0 ] && [ -z "${KEEP_LOGS:-}" ]; then rm -rf "$tmp"; else echo "logs kept in $tmp"; fi
}

# rank_pid R: the pid of rank R of this test's job (its STRATA_CKPT_URI is
# under $tmp: other tests' job-1 ranks share the process table), or nothing.
rank_pid() {
  local p
  for p in $(pgrep -x strata-train); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "RANK=$1" &&
       tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -q "^STRATA_CKPT_URI=file://$tmp/"; then
      echo "$p"
      return
    fi
  done
}

# out0: what rank 0 (the printer) wrote on host 0's worker, every attempt;
# last_step: the newest step in it.
out0() { cat "$tmp"/work-h0/job-*/attempt-*/rank-0.stdout 2> /dev/null; }
last_step() { out0 | sed -n 's/^step=\([0-9]*\) loss=.*/\1/p' | tail -n 1; }
# steps_in_place: the steps rank 0 printed after its newest "in-place restart".
steps_in_place() { out0 | awk '/^in-place restart/ {on = 1; n = 0; next} on && /^step=/ {n++} END {print n + 0}'; }

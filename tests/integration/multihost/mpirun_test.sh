#!/usr/bin/env bash
# `mpirun strata-exec -- strata-train` across two simulated hosts
# (tests/simhost/simhost.sh). mpirun runs in host h0 and starts ranks 0-1
# there and ranks 2-3 in host h1 through the MPMD form
#   mpirun -np 2 CMD : -np 2 nsenter -t H1_HOLDER --net --uts --ipc --mount CMD
# (the h1 ranks reach their PMIx server over TCP). strata-exec groups the
# ranks by hostname; strata-train --model small runs tp=2 dp=2 (and pp=2
# dp=2) and must reproduce a single process's losses. While the job runs,
# no rank may listen on a loopback address. Every run is bounded
# (timeout), so a hang fails the test instead of the suite.
#
#   mpirun_test.sh BUILD_DIR SOURCE_DIR        (ctest: multihost_mpirun_test)
#
# Exit 77 (ctest SKIP) only when mpirun or the simulated hosts are missing.
set -uo pipefail
TEST_NAME=multihost_mpirun_test
BUILD=${1:?usage: mpirun_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: mpirun_test.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/integration/multihost/common.sh
source "$SRC/tests/integration/multihost/common.sh"
# shellcheck source=tests/simhost/simhost.sh
source "$SRC/tests/simhost/simhost.sh"

MPIRUN=$(command -v mpirun) || skip "mpirun not installed"
need_bins runtime/strata-train launch/strata-exec
EXEC="$BUILD/launch/strata-exec"
STEPS=8

multihost_begin 2 "1gbit" mh-mpirun

train_args=(--model small --global-batch 4 --micro-batch 1 --steps "$STEPS")
reference_run "$tmp/reference.out" "${train_args[@]}"

# mpi_run LABEL EXEC_FLAGS...: 2 ranks in h0 and 2 in h1, bounded.
mpi_run() {
  local label=$1
  shift
  local cmd=("$EXEC" "$@" -- "$TRAIN" "${train_args[@]}")
  local out="$tmp/$label.out" start=$SECONDS
  # shellcheck disable=SC2206  # SIMHOST_NSENTER is a command prefix
  local into_h1=(${SIMHOST_NSENTER[1]})
  simhost_exec 0 env PMIX_MCA_ptl_tcp_remote_connections=1 \
    PMIX_MCA_ptl_tcp_if_include="$SIMHOST_IF" \
    timeout -k 5 240 "$MPIRUN" --allow-run-as-root --oversubscribe \
      --mca btl tcp,self --mca btl_tcp_if_include "$SIMHOST_SUBNET" \
      --mca oob_tcp_if_include "$SIMHOST_IF" \
      -np 2 "${cmd[@]}" : -np 2 "${into_h1[@]}" "${cmd[@]}" > "$out" 2>&1 &
  local pid=$! checked=0
  for _ in $(seq 1 2500); do  # at most ~250 s
    kill -0 "$pid" 2> /dev/null || break
    if [ "$checked" -eq 0 ] && grep -q "step=2 loss=" "$out"; then
      # Both hosts' ranks are connected now: none may use loopback.
      check_rank_sockets 0 "$label"
      check_rank_sockets 1 "$label"
      checked=1
    fi
    sleep 0.1
  done
  wait "$pid"
  local rc=$?
  say "$label: mpirun exited $rc after $((SECONDS - start)) s"
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && fail "$label: mpirun did not finish within 240 s (hang)"
    fail "$label: mpirun exited $rc, want 0"
    tail -n 30 "$out"
    return
  fi
  grep -q "tp=.* dp=2" "$out" || fail "$label: the ranks did not run with dp=2"
  compare_losses "$tmp/reference.out" "$out" "$label"
}

mpi_run tp2-dp2 --tp 2
# A failed (e.g. hung) first run is enough: keep the test inside its bound.
[ "$failures" -eq 0 ] && mpi_run pp2-dp2 --pp 2

if [ "$failures" -gt 0 ]; then
  echo "$TEST_NAME: $failures check(s) failed"
  exit 1
fi
say "all checks passed in $SECONDS s"

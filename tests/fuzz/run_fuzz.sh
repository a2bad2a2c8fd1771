#!/usr/bin/env bash
# Builds tests/fuzz with clang (a sub-build, see CMakeLists.txt there) and
# fuzzes the envelope decoder for a bounded time from the checked-in corpus.
#   run_fuzz.sh SOURCE_DIR BUILD_DIR SECONDS MODE
# MODE AUTO: exit 77 (ctest "skipped") with a message when clang or libFuzzer
# is missing; ON: that is a failure. A crash exits non-zero and leaves the
# input in BUILD_DIR/artifacts/ (add it to tests/fuzz/corpus once fixed).
set -uo pipefail
src=$1 build=$2 seconds=$3 mode=${4:-AUTO}
cxx=${STRATA_FUZZ_CXX:-clang++}

skip() {
  echo "envelope_fuzz: SKIPPED: $*"
  if [ "$mode" = ON ]; then exit 1; fi
  exit 77
}

command -v "$cxx" >/dev/null 2>&1 ||
  skip "$cxx not found (Debian: apt-get install clang libclang-rt-dev)"
mkdir -p "$build"
if ! cmake -S "$src/tests/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1; then
  if grep -q "STRATA-FUZZ-SKIP" "$build/configure.log"; then
    skip "$(grep -o 'STRATA-FUZZ-SKIP:.*' "$build/configure.log" | head -1)"
  fi
  cat "$build/configure.log"
  echo "envelope_fuzz: configuring the clang sub-build failed"
  exit 1
fi
if ! cmake --build "$build" -j 2 >"$build/build.log" 2>&1; then
  tail -50 "$build/build.log"
  echo "envelope_fuzz: building the fuzz target failed"
  exit 1
fi
# New inputs go to the scratch corpus (first dir); the seeds stay read-only.
mkdir -p "$build/corpus" "$build/artifacts"
"$build/envelope_fuzz" -max_total_time="$seconds" -rss_limit_mb=1024 \
  -timeout=10 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/" \
  "$build/corpus" "$src/tests/fuzz/corpus" >"$build/fuzz.log" 2>&1
rc=$?
tail -25 "$build/fuzz.log"
if [ $rc -ne 0 ]; then
  echo "envelope_fuzz: FAILED (exit $rc); reproduce with:"
  echo "  $build/envelope_fuzz $build/artifacts/<crash-file>"
  exit 1
fi
echo "envelope_fuzz: no crash in ${seconds}s"

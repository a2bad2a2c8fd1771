#!/usr/bin/env bash
# Builds tests/fuzz with clang (a sub-build, see CMakeLists.txt there) and
# runs one fuzz target for a bounded time from its checked-in corpus.
#   run_fuzz.sh SOURCE_DIR BUILD_DIR SECONDS MODE [TARGET]
# TARGET: envelope_fuzz (default; corpus tests/fuzz/corpus) or config_fuzz
# (corpus tests/fuzz/config_corpus, dictionary tests/fuzz/config.dict).
# MODE AUTO: exit 77 (ctest "skipped") with a message when clang or libFuzzer
# is missing; ON: that is a failure. A crash exits non-zero and leaves the
# input in BUILD_DIR/artifacts-TARGET/ (add it to the target's corpus once
# fixed).
set -uo pipefail
src=$1 build=$2 seconds=$3 mode=${4:-AUTO} target=${5:-envelope_fuzz}
case $target in
  envelope_fuzz) seeds=$src/tests/fuzz/corpus extra=() ;;
  config_fuzz)
    seeds=$src/tests/fuzz/config_corpus
    extra=(-dict="$src/tests/fuzz/config.dict") ;;
  *) echo "run_fuzz.sh: unknown target $target"; exit 1 ;;
esac
cxx=${STRATA_FUZZ_CXX:-clang++}

skip() {
  echo "$target: SKIPPED: $*"
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
  echo "$target: configuring the clang sub-build failed"
  exit 1
fi
if ! cmake --build "$build" -j 2 --target "$target" >"$build/build.log" 2>&1; then
  tail -50 "$build/build.log"
  echo "$target: building the fuzz target failed"
  exit 1
fi
# New inputs go to the scratch corpus (first dir); the seeds stay read-only.
mkdir -p "$build/corpus-$target" "$build/artifacts-$target"
"$build/$target" -max_total_time="$seconds" -rss_limit_mb=1024 \
  -timeout=10 -max_len=65536 -print_final_stats=1 "${extra[@]}" \
  -artifact_prefix="$build/artifacts-$target/" \
  "$build/corpus-$target" "$seeds" >"$build/$target.log" 2>&1
rc=$?
tail -25 "$build/$target.log"
if [ $rc -ne 0 ]; then
  echo "$target: FAILED (exit $rc); reproduce with:"
  echo "  $build/$target $build/artifacts-$target/<crash-file>"
  exit 1
fi
echo "$target: no crash in ${seconds}s"

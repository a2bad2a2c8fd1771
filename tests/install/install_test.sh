#!/usr/bin/env bash
# `cmake --install` into a fresh prefix, then what a user of that prefix
# sees (docs/deploy.md): every binary and libstrata.so.0 resolve their
# libraries without the build tree, libstrata exports only the C API,
# include/strata holds only the public headers, and a program of the user's
# own, built outside the source tree once with find_package(strata) (C++
# wrapper) and once with pkg-config (C API), runs under the installed
# `strata run` and prints the placement each rank read.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR. About 20 s.
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
tmp=$(mktemp -d /tmp/strata-install-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
prefix=$tmp/prefix

# strata-bench (component bench) is installed and packaged the same way;
# the user-facing components are checked here.
for c in runtime dev python; do
  cmake --install "$build" --prefix "$prefix" --strip --component "$c" >> "$tmp/install.log" \
    || { cat "$tmp/install.log"; fail "cmake --install --component $c"; }
done

version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' \
  "$prefix/lib/cmake/strata/strataConfigVersion.cmake")
[ -n "$version" ] || fail "no PACKAGE_VERSION in strataConfigVersion.cmake"
pyversion=$(sed -n 's/^__version__: str = "\(.*\)"/\1/p' "$src/python/strata/_version.py")
[ "$pyversion" = "$version" ] \
  || fail "python/strata/_version.py says $pyversion, CMake project $version"

for f in bin/strata bin/strata-coordinator bin/strata-worker bin/strata-train \
  bin/strata-inject "lib/libstrata.so.$version" lib/libstrata.so.0 lib/libstrata.so \
  include/strata/c_api.h include/strata/strata.hpp \
  lib/cmake/strata/strataConfig.cmake lib/cmake/strata/strataTargets.cmake \
  lib/pkgconfig/strata.pc lib/systemd/system/strata-worker.service \
  etc/strata/worker.env lib/python3/dist-packages/strata/_library.py; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
if command -v mpirun > /dev/null; then
  [ -x "$prefix/bin/strata-exec" ] || fail "not installed: bin/strata-exec"
fi
headers=$(cd "$prefix/include" && find . -type f | sort | tr '\n' ' ')
[ "$headers" = "./strata/c_api.h ./strata/strata.hpp " ] \
  || fail "include/ holds more than the public headers: $headers"

soname=$(readelf -d "$prefix/lib/libstrata.so.$version" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libstrata.so.0 ] || fail "SONAME is '$soname', expected libstrata.so.0"
bad=$(nm -D --defined-only "$prefix/lib/libstrata.so.0" | awk '{print $3}' \
  | grep -v '^strata_' || true)
[ -z "$bad" ] || fail "libstrata exports more than strata_*: $(echo "$bad" | head -5)"

for f in "$prefix"/bin/* "$prefix/lib/libstrata.so.0"; do
  if readelf -d "$f" | grep -E 'RPATH|RUNPATH'; then
    fail "$f has an RPATH/RUNPATH"
  fi
  if ldd "$f" | grep -q 'not found'; then
    ldd "$f" | grep 'not found'
    fail "$f: a library is not found"
  fi
  if ldd "$f" | grep -q "$build"; then fail "$f loads a library from the build tree"; fi
done

# The user's program, outside the source tree, with a clean environment.
clean_env=(env -i "PATH=$prefix/bin:/usr/bin:/bin" "HOME=$tmp" "TMPDIR=$tmp")
cp -r "$src/tests/install/consumer" "$tmp/consumer"
"${clean_env[@]}" cmake -S "$tmp/consumer" -B "$tmp/consumer/build" \
  -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/consumer.log" 2>&1 \
  || { cat "$tmp/consumer.log"; fail "configuring the consumer with find_package(strata)"; }
"${clean_env[@]}" cmake --build "$tmp/consumer/build" >> "$tmp/consumer.log" 2>&1 \
  || { cat "$tmp/consumer.log"; fail "building the consumer"; }
pc=(env "PKG_CONFIG_PATH=$prefix/lib/pkgconfig" pkg-config)
[ "$("${pc[@]}" --modversion strata)" = "$version" ] || fail "pkg-config --modversion"
libdir=$("${pc[@]}" --variable=libdir strata)
[ "$(realpath "$libdir")" = "$(realpath "$prefix/lib")" ] \
  || fail "strata.pc's libdir is $libdir, not under $prefix"
# shellcheck disable=SC2046
cc -o "$tmp/consumer-c" "$tmp/consumer/main.c" $("${pc[@]}" --cflags --libs strata) \
  "-Wl,-rpath,$libdir" || fail "building the C consumer with pkg-config"

check_run() {  # $1 = program, $2 = the name it prints
  local out=$tmp/$2.out
  (cd "$tmp" && "${clean_env[@]}" strata run --nodes 2 --ranks-per-node 2 -- "$1") \
    > "$out" 2>&1 || { cat "$out"; fail "strata run $1"; }
  for r in 0 1 2 3; do
    grep -Eq "$2 rank=$r world=4 local_rank=$((r % 2)) local_world=2 job=[^ ]+" "$out" \
      || { cat "$out"; fail "$2: no placement line for rank $r"; }
  done
  echo "$2: 4 ranks read their placement"
}
check_run "$tmp/consumer/build/consumer" consumer
check_run "$tmp/consumer-c" consumer-c
echo "PASS: installed $(find "$prefix" -type f | wc -l) files ($(du -sh "$prefix" | cut -f1))"

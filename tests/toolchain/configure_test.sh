#!/usr/bin/env bash
# A second configure changes nothing: configures SOURCE_DIR twice into a
# scratch directory (the default preset, as `make build` does) and compares
# every target's compile flags, link line and build rules. A difference
# makes `make demo` after `make test` rebuild whatever it touches (CMake
# 3.25's FindPkgConfig did that to every target linking libzmq:
# cmake/StrataDeps.cmake, strata_pkg_check).
#   configure_test.sh SOURCE_DIR
set -euo pipefail
src=$1
dir=$(mktemp -d /tmp/strata-configure-test-XXXXXX)
trap 'rm -rf "$dir"' EXIT

snapshot() {  # $1: where to copy the build files
  (cd "$dir/build" && find . \( -name flags.make -o -name link.txt \
      -o -name build.make \) -print0 | xargs -0 tar cf "$1")
}
configure() {
  if ! (cd "$src" && cmake --preset default -B "$dir/build") \
      >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log"
    echo "configure_test: configuring $src failed"
    exit 1
  fi
}
configure
snapshot "$dir/first.tar"
configure
snapshot "$dir/second.tar"
mkdir "$dir/first" "$dir/second"
tar xf "$dir/first.tar" -C "$dir/first"
tar xf "$dir/second.tar" -C "$dir/second"
files=$(find "$dir/first" -type f | wc -l)
if [ "$files" -lt 50 ]; then
  echo "configure_test: only $files build files found; the test is broken"
  exit 1
fi
if ! diff -r "$dir/first" "$dir/second"; then
  echo "configure_test: the second configure changed the build files above"
  exit 1
fi
echo "configure_test: $files build files identical after a second configure"

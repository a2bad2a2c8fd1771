#!/usr/bin/env bash
# `make package` as an operator uses it (docs/deploy.md):
# 1. cpack makes strata, strata-dev, python3-strata (and strata-bench) .deb
#    files whose Depends come from dpkg-shlibdeps; lintian reports no error;
# 2. strata + python3-strata install into a clean Debian 12 minbase root
#    (tests/package/debian_root.sh; none of the build dependencies) with
#    apt resolving nothing but their Depends, every installed ELF file
#    resolves its libraries there (a library missing from Depends fails
#    here), and, with no environment variable set, inside that root:
#      strata run --nodes 2 --ranks-per-node 1 -- strata-train --model tiny --steps 20
#      python3 -c "import strata"
# Debian's archive is needed once (the root and the Depends' .deb files are
# cached under BUILD/deb-root); skipped (77) only when it cannot be reached.
# Usage: deb_test.sh BUILD_DIR SOURCE_DIR. About 2 min (cpack and lintian
# most of it); 4 min the first time (downloads).
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
. "$src/tests/package/debian_root.sh"
tmp=$(mktemp -d /tmp/strata-deb-test-XXXXXX)
cleanup() {
  # The root's mounts live in the unshare'd namespace and die with it.
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
t0=$(date +%s)

# 1. The packages (BUILD/packages, as `make package` leaves them).
. "$src/tests/package/fresh_packages.sh"
fresh_packages "$build"
ln -s "$build/packages" "$tmp/packages"
debs=("$tmp"/packages/*.deb)
for name in strata strata-dev python3-strata; do
  ls "$tmp"/packages/"${name}"_*.deb > /dev/null 2>&1 || fail "no ${name} package"
done
echo "packages: $(($(date +%s) - t0)) s"
depends=$(dpkg-deb -f "$tmp"/packages/strata_*.deb Depends)
echo "strata Depends: $depends"
for lib in libc6 libstdc++6 libzmq5 librocksdb libprotobuf libopenmpi; do
  grep -q "$lib" <<< "$depends" || fail "strata's Depends lacks $lib (dpkg-shlibdeps)"
done
t1=$(date +%s)
lintian --no-tag-display-limit "${debs[@]}" > "$tmp/lintian.log" 2>&1 || true
errors=$(grep -c '^E:' "$tmp/lintian.log" || true)
echo "lintian: $errors errors, $(grep -c '^W:' "$tmp/lintian.log" || true) warnings ($(($(date +%s) - t1)) s)"
[ "$errors" -eq 0 ] || { grep '^E:' "$tmp/lintian.log"; fail "lintian errors"; }

# 2. A clean Debian 12 root with only the packages and their Depends.
base=$(debian_base_tar "$build")
root=$tmp/root
mkdir "$root"
tar -xf "$base" -C "$root"
mkdir "$root/debs"
cp "$tmp"/packages/strata_*.deb "$tmp"/packages/python3-strata_*.deb "$root/debs/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The machine's own name resolves, as on any cluster node.
cp /etc/hosts "$root/etc/hosts"
cat > "$tmp/inside.sh" <<'INSIDE'
set -eu
root=$1
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o size=512m tmpfs "$root/dev/shm"
mount -t tmpfs tmpfs "$root/tmp"
mount --bind "$2" "$root/var/cache/apt/archives"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends $(cd "$root" && ls debs/*.deb | sed 's|^|/|') \
  > "$3/apt.log" 2>&1 || exit 10
# Every ELF file of the packages resolves its libraries.
for f in $(chroot "$root" dpkg -L strata | grep -E '^/usr/(bin|lib)/'); do
  [ -f "$root$f" ] && [ ! -L "$root$f" ] || continue
  if chroot "$root" ldd "$f" 2>&1 | grep 'not found'; then echo "$f: library not found"; exit 11; fi
done
# No environment at all: what an operator's shell would not have either.
chroot "$root" /usr/bin/env -i strata run --nodes 2 --ranks-per-node 1 -- \
  strata-train --model tiny --steps 20 > "$3/run.out" 2>&1 || exit 12
chroot "$root" /usr/bin/env -i python3 -c \
  'import strata; print("python3-strata", strata.__version__, strata.__file__)' \
  > "$3/python.out" 2>&1 || exit 13
INSIDE
t2=$(date +%s)
set +e
unshare --mount --pid --fork bash "$tmp/inside.sh" "$root" "$build/deb-root/archives" "$tmp"
rc=$?
set -e
case $rc in
  0) ;;
  10)
    if is_network_failure "$tmp/apt.log"; then
      echo "SKIP: Debian's archive is unreachable (apt-get in the clean root: $(grep -Em1 'Could not|Unable|Temporary' "$tmp/apt.log"))"
      exit 77
    fi
    cat "$tmp/apt.log"; fail "apt-get install of the packages into the clean root" ;;
  11) fail "an installed file's library is missing from the packages' Depends" ;;
  12) cat "$tmp/run.out"; fail "strata run in the clean root" ;;
  13) cat "$tmp/python.out"; fail "import strata in the clean root" ;;
  *) fail "setting up the clean root (rc $rc)" ;;
esac
grep -Eq 'SUCCEEDED' "$tmp/run.out" || { cat "$tmp/run.out"; fail "the job did not succeed"; }
cat "$tmp/python.out"
echo "clean root: install + run $(($(date +%s) - t2)) s"
echo "PASS in $(($(date +%s) - t0)) s"

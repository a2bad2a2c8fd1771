#!/usr/bin/env bash
# Builds strata's OCI image from the Debian packages (`make package`) on a
# Debian 12 base made from Debian's archive: no registry is needed.
#
#   deploy/container/build-image.sh [--systemd] PACKAGES_DIR [IMAGE] [CACHE_DIR]
#
# PACKAGES_DIR holds strata_*.deb and python3-strata_*.deb; IMAGE defaults to
# localhost/strata:<version of the strata .deb>. CACHE_DIR (default
# PACKAGES_DIR/../deb-root) keeps the mmdebstrap minbase tarball and the
# .deb files apt fetched, so rebuilding needs no network.
#
# One image serves both roles (docs/deploy.md, "Container"):
#   podman run IMAGE strata-coordinator --listen tcp://0.0.0.0:5555 --state-dir /var/lib/strata/coordinator
#   podman run IMAGE strata-worker --coordinator tcp://COORD:5555 --work-dir /var/lib/strata/worker
# The image runs as root inside its user namespace; strata's own files are
# the packages' (/usr/bin, /usr/lib, /etc/strata).
#
# --systemd adds systemd as the image's init (CMD /lib/systemd/systemd), for
# running the packaged units (deploy/systemd/) in a container:
#   podman run --systemd=always IMAGE   then   systemctl enable --now strata-worker
set -euo pipefail
usage() { echo "usage: $0 [--systemd] PACKAGES_DIR [IMAGE] [CACHE_DIR]" >&2; exit 2; }
extra=()
cmd='["strata", "--help"]'
if [ "${1:-}" = --systemd ]; then
  extra=(systemd systemd-sysv dbus)
  cmd='["/lib/systemd/systemd"]'
  shift
fi
[ $# -ge 1 ] || usage
pkgs=$(realpath "$1")
deb=$(ls "$pkgs"/strata_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "build-image: no strata_*.deb in $pkgs (run make package)" >&2; exit 2; }
version=$(dpkg-deb -f "$deb" Version)
image=${2:-localhost/strata:$version}
cache=$(realpath -m "${3:-$pkgs/../deb-root}")
mkdir -p "$cache/archives/partial"
podman=(podman --runtime runc --cgroup-manager=cgroupfs)

base=$cache/bookworm-minbase.tar
if [ ! -s "$base" ]; then
  mmdebstrap --variant=minbase --quiet --skip=cleanup/apt/lists \
    --skip=cleanup/apt/cache bookworm "$base.part.tar"
  mv "$base.part.tar" "$base"
fi

work=$(mktemp -d /tmp/strata-image-XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT
root=$work/root
mkdir "$root"
tar -xf "$base" -C "$root"
mkdir "$root/debs"
cp "$deb" "$pkgs"/python3-strata_*.deb "$root/debs/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# apt runs in the root (chroot) with its own mount namespace: /proc, /dev
# and the archive cache are mounted there only.
unshare --mount --pid --fork bash -euc '
  root=$1
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --bind "$2" "$root/var/cache/apt/archives"
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends \
    $(cd "$root" && ls debs/*.deb | sed "s|^|/|") "${@:3}"
' _ "$root" "$cache/archives" "${extra[@]}"
rm -rf "$root/debs" "$root/var/lib/apt/lists"/* "$root/etc/resolv.conf"
: > "$root/etc/resolv.conf"  # podman writes the container's own
mkdir -p "$root/var/lib/strata"
tar -C "$root" -cf "$work/image.tar" .
"${podman[@]}" import \
  --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'WORKDIR /var/lib/strata' \
  --change "CMD $cmd" \
  --change "LABEL org.opencontainers.image.version=$version" \
  --change 'LABEL org.opencontainers.image.title=strata' \
  "$work/image.tar" "$image" > /dev/null
echo "$image"

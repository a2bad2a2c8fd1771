# Sourced by the package and container tests: a clean Debian 12 (bookworm)
# minbase root file system from Debian's archive, made once by mmdebstrap and
# cached as a tarball in the build tree (BUILD/deb-root/), plus a cache of
# the .deb files apt fetches into such roots.
#
# debian_base_tar BUILD  -> prints the tarball's path; exit 77 (skip) when
#                           the archive cannot be reached, saying so.
debian_base_tar() {
  local cache=$1/deb-root
  local tar=$cache/bookworm-minbase.tar
  mkdir -p "$cache/archives/partial"
  if [ ! -s "$tar" ]; then
    command -v mmdebstrap > /dev/null \
      || { echo "FAIL: mmdebstrap not installed (deploy/install-deps.sh test)" >&2; exit 1; }
    # --skip=cleanup/apt/lists keeps the package lists, so later installs
    # into a copy need no `apt-get update` (only the .deb files, cached too).
    if ! mmdebstrap --variant=minbase --quiet --skip=cleanup/apt/lists \
      --skip=cleanup/apt/cache bookworm "$tar.part.tar" > "$cache/mmdebstrap.log" 2>&1; then
      rm -rf "$tar.part.tar"
      if grep -Eq "Could not resolve|Failed to fetch|Temporary failure|Unable to connect|Connection (timed out|refused)" \
        "$cache/mmdebstrap.log"; then
        echo "SKIP: Debian's archive is unreachable (mmdebstrap: $(grep -Em1 'Could not resolve|Failed to fetch|Temporary failure|Unable to connect|Connection' "$cache/mmdebstrap.log"))"
        exit 77
      fi
      cat "$cache/mmdebstrap.log" >&2
      echo "FAIL: mmdebstrap failed" >&2
      exit 1
    fi
    mv "$tar.part.tar" "$tar"
  fi
  echo "$tar"
}

# is_network_failure LOG -> 0 when apt's log says the archive was unreachable
is_network_failure() {
  grep -Eq "Could not resolve|Temporary failure resolving|Unable to connect|Connection (timed out|refused)" "$1"
}

#!/bin/sh
# Creates the Python environment of strata's PyTorch tests and examples
# (docs/pytorch.md): a venv on Debian's python3 with torch 2.x from PyPI.
# Debian 12's python3-torch (1.13) cannot import torch.distributed.checkpoint
# or FSDP on Python 3.11, so the strata.torch tests need this one.
#
# Usage: deploy/python-venv.sh [VENV_DIR]   (default: build/venv)
# Reused when VENV_DIR/.strata-torch names the same requirements. When PyPI
# cannot be reached, writes VENV_DIR/.strata-torch-unavailable with the
# reason and exits 0: the tests that need torch 2.x then skip (exit 77)
# quoting it. Any other failure exits non-zero.
#
# Cost on a fresh machine (docs/results.md, "PyTorch"): PyPI's Linux torch
# wheel is the CUDA build; its NVIDIA libraries are linked by libtorch and
# must be present for `import torch` even on CPU: ~3.0 GB downloaded,
# 5.4 GB installed, ~90 s.
set -eu
venv=${1:-build/venv}
# One place for the versions; torch pins its NVIDIA libraries itself.
reqs="torch==2.15.0 numpy==2.4.6 py-spy==0.4.3"
stamp="$venv/.strata-torch"
mkdir -p "$venv"
# One creator at a time (ctest runs tests in parallel); the others wait
# and then find it made.
if [ -z "${STRATA_VENV_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
  STRATA_VENV_LOCKED=1 exec flock "$venv/.lock" "$0" "$venv"
fi
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$reqs" ]; then
  exit 0
fi
rm -f "$venv/.strata-torch-unavailable"
if ! /usr/bin/python3 -c 'import urllib.request as u; u.urlopen("https://pypi.org/simple/pip/", timeout=10)' \
    >/dev/null 2>&1; then
  echo "PyPI (https://pypi.org) cannot be reached: torch 2.x not installed" \
    > "$venv/.strata-torch-unavailable"
  cat "$venv/.strata-torch-unavailable" >&2
  exit 0
fi
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
# shellcheck disable=SC2086  # $reqs is a list of requirements
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --only-binary=:all: $reqs
"$venv/bin/python" -c 'import torch.distributed.checkpoint, torch.distributed.fsdp'
echo "$reqs" > "$stamp"

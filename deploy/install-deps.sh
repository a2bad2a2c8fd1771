#!/usr/bin/env bash
# Installs every Debian package strata builds, tests and runs with.
# Idempotent: packages already installed are skipped, and nothing is fetched
# when all are present. CUDA/NCCL are never installed here: the build detects
# them under /usr/local/cuda (STRATA_WITH_CUDA=AUTO).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git clang-format
  # Collectives and launch
  openmpi-bin libopenmpi-dev
  # Slurm launch (deploy/slurm/strata.sbatch) and its single-host test
  # (tests/integration/slurm/slurm_test.sh starts these daemons itself)
  munge slurmctld slurmd slurm-client
  # Simulated hosts for the multi-host tests (tests/simhost/simhost.sh):
  # ip, tc and ss (iproute2), nsenter and unshare (util-linux)
  iproute2 util-linux
  # Control plane
  libzmq3-dev cppzmq-dev
  # Rank keys derived with BLAKE2b (issue 30, coordinator/security/rank_keys.h)
  libsodium-dev
  # Storage and schemas
  librocksdb-dev libprotobuf-dev protobuf-compiler
  # Logging, errors, CLI, config
  libspdlog-dev libfmt-dev libabsl-dev libcli11-dev libyaml-cpp-dev
  # Tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # libFuzzer for the control envelope fuzz test (ctest envelope_fuzz)
  clang libclang-rt-dev
  # Node probe, trainer GEMMs, checksums, metrics endpoint
  libhwloc-dev hwloc libopenblas-dev libxxhash-dev libcpp-httplib-dev
  # PNG pictures (observe/png.h)
  zlib1g-dev
  # promtool checks the Prometheus exposition (observe/metrics_test); the
  # server scrapes a coordinator (prometheus_scrape_test), queried with curl
  prometheus curl
  # headless Chromium loads the coordinator's dashboard (dashboard_test)
  chromium-headless-shell fonts-dejavu-core
  # eu-stack: stacks of hung ranks in hang diagnoses (worker/stack_dump.h)
  elfutils
  # Python side (tests, examples): Debian's interpreter and packages only
  python3
  # torch.save, the checkpoint benchmark's peer (strata-bench ckpt)
  python3-torch
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

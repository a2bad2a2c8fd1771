#!/usr/bin/env bash
# Installs the Debian packages strata needs, by profile:
#   node   what a cluster node needs to RUN strata from source-built binaries
#          (the shared libraries the daemons and ranks load, mpirun, eu-stack);
#          nodes that install the strata .deb files get these through Depends
#   build  node + compilers, headers, protoc and the packaging tools
#          (`make package`: dpkg-shlibdeps, lintian)
#   test   build + what the test suite drives: Slurm daemons, Prometheus,
#          headless Chromium, torch, simulated hosts, containers (podman,
#          mmdebstrap), systemd-analyze
#   all    the union (the default; `make deps` uses it)
# Usage: deploy/install-deps.sh [node|build|test|all] ...
# Idempotent: packages already installed are skipped, and nothing is fetched
# when all are present. CUDA/NCCL are never installed here: the build detects
# them under /usr/local/cuda (STRATA_WITH_CUDA=AUTO).
set -euo pipefail

NODE=(
  # mpirun for strata-exec (launch/); eu-stack for hang diagnoses
  # (worker/stack_dump.h); ip/nsenter used by the worker's probes
  openmpi-bin elfutils iproute2 util-linux
  # Shared libraries the binaries load (Debian 12 names; the .deb files
  # compute theirs with dpkg-shlibdeps instead of this list)
  libzmq5 librocksdb7.8 libprotobuf32 libspdlog1.10 libfmt9 libyaml-cpp0.7
  libhwloc15 libopenblas0 libxxhash0 libsystemd0 zlib1g
  libabsl20220623 libsodium23
  # Python ranks (python/strata)
  python3
)

BUILD=(
  build-essential cmake pkg-config git clang-format
  # Compiler cache: `make test` builds twice (with CUDA, and the CUDA-free
  # package build); the second reuses the first's objects (CMakeLists.txt)
  ccache
  # Collectives and launch
  libopenmpi-dev
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
  # sd_notify READY/WATCHDOG from the daemons under systemd (issue 31)
  libsystemd-dev
  # `make package` (issue 31): CPack's DEB generator, dpkg-shlibdeps
  # (dpkg-dev), lintian, the wheel (python3-setuptools, python3-wheel,
  # python3-pip, python3-venv)
  dpkg-dev fakeroot file lintian
  python3-setuptools python3-wheel python3-pip python3-venv
)

TEST=(
  # Slurm launch (deploy/slurm/strata.sbatch) and its single-host test
  # (tests/integration/slurm/slurm_test.sh starts these daemons itself)
  munge slurmctld slurmd slurm-client
  # promtool checks the Prometheus exposition (observe/metrics_test); the
  # server scrapes a coordinator (prometheus_scrape_test), queried with curl
  prometheus curl
  # headless Chromium loads the coordinator's dashboard (dashboard_test)
  chromium-headless-shell fonts-dejavu-core
  # torch.save, the checkpoint benchmark's peer (strata-bench ckpt), and the
  # torch DDP example
  python3-torch
  # Issue 31: the package test's clean Debian 12 root (mmdebstrap), the
  # container test (podman, runc), systemd-analyze verify/security (systemd)
  mmdebstrap podman runc systemd
)

profiles=("$@")
[ ${#profiles[@]} -eq 0 ] && profiles=(all)
PACKAGES=()
for prof in "${profiles[@]}"; do
  case "$prof" in
    node) PACKAGES+=("${NODE[@]}") ;;
    build) PACKAGES+=("${NODE[@]}" "${BUILD[@]}") ;;
    test | all) PACKAGES+=("${NODE[@]}" "${BUILD[@]}" "${TEST[@]}") ;;
    *)
      echo "install-deps: unknown profile '$prof' (expected node, build, test or all)" >&2
      exit 2
      ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present (${profiles[*]})"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

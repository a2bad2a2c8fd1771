# Finds the Debian packages installed by deploy/install-deps.sh and detects
# CUDA/NCCL under /usr/local/cuda (STRATA_WITH_CUDA=AUTO never requires them).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(absl REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
if(STRATA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(STRATA_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

set(STRATA_HAVE_CUDA OFF)
set(STRATA_HAVE_NCCL OFF)
if(NOT STRATA_WITH_CUDA STREQUAL "OFF")
  if(EXISTS /usr/local/cuda/bin/nvcc AND NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(STRATA_HAVE_CUDA ON)
    find_library(STRATA_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    find_path(STRATA_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    if(STRATA_NCCL_LIBRARY AND STRATA_NCCL_INCLUDE)
      set(STRATA_HAVE_NCCL ON)
    endif()
  elseif(STRATA_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STRATA_WITH_CUDA=ON but no CUDA toolkit was found")
  endif()
endif()
message(STATUS "strata: CUDA ${STRATA_HAVE_CUDA}, NCCL ${STRATA_HAVE_NCCL}")

# Open MPI: the mpi backend and the comm benchmark's peer.
find_package(MPI COMPONENTS CXX)
set(STRATA_HAVE_MPI ${MPI_CXX_FOUND})
message(STATUS "strata: MPI ${STRATA_HAVE_MPI}")

# Libraries found through pkg-config, as global imported targets
# PkgConfig::<PREFIX>. strata_pkg_check forgets pkg_check_modules' cached
# result first, so every configure queries pkg-config: CMake 3.25's
# FindPkgConfig moves `-isystem DIR` from the compile options to the include
# directories only on the configure that queries pkg-config, and later ones,
# reading its cache, pass it as a compile option instead. libzmq.pc has
# `-isystem /usr/include/mit-krb5`, so the second configure (`make demo`
# after `make test`) changed the flags of every target linking libzmq and
# rebuilt 94 objects. tests/toolchain/configure_test.sh checks that configuring
# twice gives the same build files.
find_package(PkgConfig REQUIRED)
macro(strata_pkg_check prefix module)
  unset(__pkg_config_checked_${prefix} CACHE)
  pkg_check_modules(${prefix} REQUIRED IMPORTED_TARGET GLOBAL ${module})
endmacro()
strata_pkg_check(ZMQ libzmq)               # control/
strata_pkg_check(HTTPLIB cpp-httplib)      # observe/ (see strata_http there)
strata_pkg_check(HWLOC hwloc)              # topology/probe/
strata_pkg_check(OPENBLAS openblas)        # topology/probe/, train/

find_package(RocksDB REQUIRED)             # common/, checkpoint/, coordinator/
find_package(ZLIB REQUIRED)                # observe/ (PNG pictures, png.h)
find_library(STRATA_XXHASH_LIBRARY xxhash REQUIRED)  # checkpoint/

// STRATA_KERNEL: compiles a function three times, for AVX-512 (x86-64-v4),
// AVX2+FMA (x86-64-v3) and the baseline ISA, and picks one at load time
// (GCC's target_clones: an ifunc resolver asks the CPU once), so a binary
// runs on any x86-64 and uses the widest vectors present. Elsewhere (other
// compilers, other architectures) it is empty. The kernels it marks are
// plain loops written for GCC's -O3 vectorizer; their files are built with
// -O3 (train/CMakeLists.txt, comm/CMakeLists.txt).
//
// STRATA_INLINE: helpers of kernels, inlined into each clone so that they
// take its ISA.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define STRATA_KERNEL           \
  __attribute__((target_clones( \
      "arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STRATA_KERNEL
#endif

#if defined(__GNUC__)
#define STRATA_INLINE [[gnu::always_inline]] inline
#else
#define STRATA_INLINE inline
#endif

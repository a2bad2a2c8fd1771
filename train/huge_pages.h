// Storage for the trainer's large arrays (weights, gradients, Adam moments)
// on transparent huge pages.
//
// Contract: HugePageAllocator<T> hands out memory aligned to 2 MiB and
// marked MADV_HUGEPAGE (Linux) for requests of at least 2 MiB, before any
// page of it is touched, so the kernel can back it with 2 MiB pages where
// transparent huge pages are enabled in "always" or "madvise" mode (Debian's
// default is "madvise": without the advice every page is 4 KiB). Smaller
// requests, and systems without the advice, get ordinary memory. Nothing
// else changes: the contents and the std::vector interface are the same.
//
// Why: OpenBLAS packs each weight matrix into its own layout on every call,
// reading it row by row, and a 320 x 1280 fp32 weight on 4 KiB pages puts
// successive rows on different pages. Measured: the packing's share of a
// one-thread step fell by 1.6-2.1 points (docs/train.md "Where a step
// goes").
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace strata::train {

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) {
      if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) {
        return static_cast<T*>(p);
      }
      throw std::bad_alloc();
    }
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    // Advice only: on failure (no THP support) the memory is still usable.
    (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

using HugeFloats = std::vector<float, HugePageAllocator<float>>;

}  // namespace strata::train

#include "coordinator/server/heap_policy.h"

#include <malloc.h>

namespace strata::coordinator {

namespace {
// glibc's initial M_MMAP_THRESHOLD and M_TRIM_THRESHOLD (mallopt(3)).
constexpr int kThresholdBytes = 128 * 1024;
}  // namespace

void ConfigureHeap() {
#ifdef __GLIBC__
  (void)mallopt(M_ARENA_MAX, 1);
  (void)mallopt(M_MMAP_THRESHOLD, kThresholdBytes);
  (void)mallopt(M_TRIM_THRESHOLD, kThresholdBytes);
#endif
}

void ReleaseFreeHeap() {
#ifdef __GLIBC__
  (void)malloc_trim(0);
#endif
}

}  // namespace strata::coordinator

// Copy into staging buffers with non-temporal stores (internal). A staging
// buffer is written once and read back only by the persist thread, later:
// streaming stores skip reading the destination lines into cache first
// (read-for-ownership) and leave the cache to training. glibc's memcpy does
// the same only above its non_temporal_threshold (192 MiB on the dev VMs:
// `ld.so --list-diagnostics`), so the 1 MiB pieces a staging copy is cut
// into would run ~1.8x slower through memcpy than one large copy.
#pragma once

#include <cstddef>

namespace strata::checkpoint::internal {

// Like memcpy (no overlap); x86-64 streams 16-byte SSE2 stores to a
// 16-byte-aligned part of dst, elsewhere it is memcpy.
void StreamCopy(void* dst, const void* src, size_t n);

}  // namespace strata::checkpoint::internal

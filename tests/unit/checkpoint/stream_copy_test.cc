#include "checkpoint/internal/stream_copy.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace strata::checkpoint::internal {
namespace {

// Every head/tail case: sizes around the 16-byte store and 64-byte loop
// widths, at every destination and source misalignment within 16 bytes.
TEST(StreamCopyTest, CopiesEveryByteAtAnyAlignment) {
  std::vector<unsigned char> src(4096 + 64), dst(4096 + 64);
  std::iota(src.begin(), src.end(), 0);
  for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 200, 4096}) {
    for (size_t da = 0; da < 16; ++da) {
      for (size_t sa : {0, 3, 8}) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        StreamCopy(dst.data() + da, src.data() + sa, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= da && i < da + n;
          ASSERT_EQ(dst[i], inside ? src[sa + i - da] : 0xEE)
              << "n=" << n << " dst+" << da << " src+" << sa << " byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata::checkpoint::internal

// Staging buffers: sized, reused without reallocation at the same size,
// movable; pinned only where the CUDA runtime can pin (never here without
// a GPU driver — the fallback is what runs on these machines).
#include "checkpoint/internal/host_buffer.h"

#include <gtest/gtest.h>

#include <cstring>

namespace strata::checkpoint::internal {
namespace {

TEST(HostBufferTest, ResizeReuseAndMove) {
  HostBuffer a;
  EXPECT_EQ(a.size(), 0u);
  a.Resize(1 << 20);
  ASSERT_NE(a.data(), nullptr);
  std::memset(a.data(), 7, a.size());
  char* p = a.data();
  a.Resize(1 << 20);  // same size: same memory, contents kept
  EXPECT_EQ(a.data(), p);
  EXPECT_EQ(a.data()[12345], 7);
  HostBuffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  b.Resize(0);
  EXPECT_EQ(b.size(), 0u);
  if (!b.pinned()) {
    SUCCEED() << "no CUDA pinning available here; ordinary pages used";
  }
}

}  // namespace
}  // namespace strata::checkpoint::internal

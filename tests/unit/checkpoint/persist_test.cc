#include "checkpoint/internal/persist.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/storage.h"

namespace strata::checkpoint::internal {
namespace {

Part MakePart(const std::string& name, std::vector<char>& bytes) {
  Part p;
  p.tensor.name = name;
  p.tensor.dtype = DType::kU8;
  const int64_t n = static_cast<int64_t>(bytes.size());
  p.tensor.global_shape = {n};
  p.tensor.local_shape = {n};
  p.tensor.global_offset = {0};
  p.tensor.data = bytes.data();
  return p;
}

// WriteRankData on the file storage: a small chunk, then chunks of 1 MiB
// and more (the second from page-aligned memory, written without a copy)
// start 4 KiB-aligned in the stream; every block checksum, computed on the
// helper threads, is the XXH3-64 of the bytes stored at its place.
TEST(PersistTest, AlignedChunksWithTheirChecksums) {
  const std::string dir = testing::TempDir() + "/persist_test";
  std::filesystem::remove_all(dir);
  auto storage = OpenStorage("file://" + dir, 0, /*writable=*/true);
  ASSERT_TRUE(storage.ok()) << storage.status();
  std::vector<char> small(100), odd((1 << 20) + 3), big(5 << 20);
  char* aligned = static_cast<char*>(std::aligned_alloc(4096, 3 << 20));
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<char>(i);
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<char>(i * 3);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i / 7);
  for (size_t i = 0; i < (3u << 20); ++i) aligned[i] = static_cast<char>(i * 5);
  std::vector<char> aligned_view(aligned, aligned + (3 << 20));  // for sizes
  std::vector<Part> parts = {MakePart("small", small), MakePart("odd", odd),
                             MakePart("aligned", aligned_view),
                             MakePart("big", big)};
  parts[2].tensor.data = aligned;
  const size_t block = 1 << 20;
  auto index = WriteRankData(**storage, 7, 0, block, parts, {});
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->tensors_size(), 4);
  for (int t = 0; t < 4; ++t) {
    const ChunkMeta& c = index->tensors(t).chunks(0);
    const size_t n = c.length();
    ASSERT_EQ(n, parts[t].tensor.Bytes());
    if (n >= (1u << 20)) {
      EXPECT_EQ(c.offset() % 4096, 0u) << t;
    }
    std::vector<char> back(n);
    ASSERT_TRUE((*storage)->ReadData(7, c.file(), c.offset(), back.data(), n).ok());
    EXPECT_TRUE(std::equal(back.begin(), back.end(),
                           static_cast<const char*>(parts[t].tensor.data)))
        << t;
    ASSERT_EQ(static_cast<size_t>(c.block_xxh3_size()), (n + block - 1) / block);
    for (int b = 0; b < c.block_xxh3_size(); ++b) {
      const size_t o = b * block;
      EXPECT_EQ(c.block_xxh3(b),
                XXH3_64bits(back.data() + o, std::min(block, n - o)))
          << t << " block " << b;
    }
  }
  std::free(aligned);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::checkpoint::internal

#include "checkpoint/internal/direct_writer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace strata::checkpoint::internal {
namespace {

std::string Path(const std::string& name) {
  return testing::TempDir() + "/direct_writer_test_" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Files of every length class (empty, under one block, across write
// buffers, more buffers than the writer has) appended in uneven pieces
// read back byte for byte and exactly as long as appended.
TEST(DirectWriterTest, WritesEveryByteInOrder) {
  const size_t buf = DirectWriter::kBufferBytes;
  for (size_t total : {size_t{0}, size_t{1}, size_t{4097}, buf,
                       2 * buf + 12345,
                       (DirectWriter::kBuffers + 2) * buf + 7}) {
    std::string data(total, '\0');
    for (size_t i = 0; i < total; ++i) data[i] = static_cast<char>(i * 131 + i / 4096);
    const std::string path = Path(std::to_string(total));
    auto w = DirectWriter::Create(path);
    ASSERT_TRUE(w.ok()) << w.status();
    for (size_t o = 0, k = 1; o < total; o += k, k = k * 7 + 3) {
      k = std::min(k % (buf + 999) + 1, total - o);
      ASSERT_TRUE((*w)->Append(data.data() + o, k).ok());
    }
    EXPECT_EQ((*w)->size(), total);
    ASSERT_TRUE((*w)->Finish().ok());
    EXPECT_TRUE(ReadAll(path) == data) << "length " << total;
    std::filesystem::remove(path);
  }
}

// Page-aligned stretches are written from the caller's memory without a
// copy; mixed with copied ones (after whole blocks, after a partial block)
// the file still holds every byte in order.
TEST(DirectWriterTest, AlignedStretchesMixWithCopiedOnes) {
  const size_t buf = DirectWriter::kBufferBytes;
  const size_t big = 2 * buf + 3 * 4096 + 100;  // over two buffers, a tail
  char* src = static_cast<char*>(std::aligned_alloc(4096, big));
  ASSERT_NE(src, nullptr);
  for (size_t i = 0; i < big; ++i) src[i] = static_cast<char>(i * 7 + i / 999);
  const std::string path = Path("aligned");
  auto w = DirectWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  std::string want;
  auto append = [&](const char* p, size_t n) {
    ASSERT_TRUE((*w)->Append(p, n).ok());
    want.append(p, n);
  };
  append(src, big);                 // aligned at offset 0
  append(src, 4096 - 100);          // the tail fills the block: aligned again
  append(src, big);                 // aligned after buffered whole blocks
  append(src + 1, 5000);            // copied
  append(src, big);                 // file offset unaligned: copied
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_TRUE(ReadAll(path) == want);
  std::free(src);
  std::filesystem::remove(path);
}

// A write the file system refuses (here: past RLIMIT_FSIZE, EFBIG) fails
// the stream: Append or Finish returns the error, never OK.
TEST(DirectWriterTest, WriteErrorFailsTheStream) {
  const size_t buf = DirectWriter::kBufferBytes;
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = buf + buf / 2;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string path = Path("efbig");
  auto w = DirectWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<char> data(buf / 4, 'x');
  Status st;
  for (int i = 0; i < 4 * (DirectWriter::kBuffers + 2) && st.ok(); ++i) {
    st = (*w)->Append(data.data(), data.size());
  }
  if (st.ok()) st = (*w)->Finish();
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find(path), std::string::npos) << st;
  w->reset();  // joins the writer threads after a failure
  std::filesystem::remove(path);
}

TEST(DirectWriterTest, UnwritablePathIsAnError) {
  auto w = DirectWriter::Create(Path("no/such/dir/file"));
  EXPECT_FALSE(w.ok());
}

}  // namespace
}  // namespace strata::checkpoint::internal

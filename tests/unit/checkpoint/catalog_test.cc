#include "checkpoint/catalog.h"

#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"

namespace strata::checkpoint {
namespace {

class CatalogTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CatalogTest, CommitsAndRetentionAreRecordedForBothBackends) {
  std::string tmpl = ::testing::TempDir() + "/catalog_XXXXXX";
  const std::string root = mkdtemp(tmpl.data());
  const std::string uri = GetParam() + root + "/ckpt";
  auto catalog = Catalog::Open(root + "/catalog");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  std::shared_ptr<Catalog> cat(std::move(*catalog));
  CheckpointOptions o;
  o.uri = uri;
  o.store = comm::NewInMemoryStore();
  o.catalog = cat;
  o.job = "llama";
  o.keep_last = 2;
  {
    Checkpointer ckpt(o);
    std::vector<float> w(1000);
    for (int64_t step = 1; step <= 3; ++step) {
      std::fill(w.begin(), w.end(), static_cast<float>(step));
      ShardedTensor t{"w", DType::kF32, {1000}, {1000}, {0}, 0, 1, w.data()};
      ASSERT_TRUE(ckpt.SaveAsync(step, {t}, {}).ok());
      ASSERT_TRUE(ckpt.Wait().ok());
    }
  }
  EXPECT_EQ(*cat->Latest("llama"), 3);
  EXPECT_EQ(*cat->Steps("llama"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*ListSteps(uri), (std::vector<int64_t>{2, 3}));
  auto removed = cat->Get("llama", 1);
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed->committed);
  auto entry = cat->Get("llama", 3);
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->uri, uri);
  // The catalog holds the chunk table: tensor -> chunks with file, offset,
  // length and checksums, identical to the manifest in the storage.
  auto manifest = ReadManifest(uri, 3);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(entry->manifest.SerializeAsString(), manifest->SerializeAsString());
  ASSERT_EQ(entry->manifest.tensors(0).chunks_size(), 1);
  EXPECT_EQ(entry->manifest.tensors(0).chunks(0).length(), 4000u);
  EXPECT_EQ(cat->Latest("other").status().code(), absl::StatusCode::kNotFound);
}

// Without an explicit catalog, default_catalog makes rank 0 keep one next
// to the checkpoint (what strata-train and the runtime use).
TEST_P(CatalogTest, DefaultCatalogLivesNextToTheCheckpoint) {
  std::string tmpl = ::testing::TempDir() + "/catalog_XXXXXX";
  const std::string root = mkdtemp(tmpl.data());
  const std::string uri = GetParam() + root + "/ckpt";
  CheckpointOptions o;
  o.uri = uri;
  o.store = comm::NewInMemoryStore();
  o.job = "job-7";
  o.default_catalog = true;
  {
    Checkpointer ckpt(o);
    std::vector<float> w(64, 1.0f);
    ShardedTensor t{"w", DType::kF32, {64}, {64}, {0}, 0, 1, w.data()};
    ASSERT_TRUE(ckpt.SaveAsync(5, {t}, {}).ok());
    ASSERT_TRUE(ckpt.Wait().ok());
  }
  EXPECT_EQ(DefaultCatalogPath(uri), root + "/ckpt/catalog.rocksdb");
  auto cat = Catalog::Open(DefaultCatalogPath(uri));
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_EQ(*(*cat)->Latest("job-7"), 5);
  EXPECT_EQ(*ListSteps(uri), (std::vector<int64_t>{5}));  // not a step
}

INSTANTIATE_TEST_SUITE_P(Backends, CatalogTest,
                         ::testing::Values(std::string("file://"),
                                           std::string("rocksdb://")));

TEST(CatalogDamageTest, DamagedValueIsDataLoss) {
  std::string tmpl = ::testing::TempDir() + "/catalogd_XXXXXX";
  const std::string path = std::string(mkdtemp(tmpl.data())) + "/catalog";
  {
    auto cat = Catalog::Open(path);
    ASSERT_TRUE(cat.ok());
    Manifest m;
    m.set_step(4);
    ASSERT_TRUE((*cat)->RecordCommit("j", "file:///x", m).ok());
  }
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "job/j/step/000000000004",
                        "\xff\xff garbage")
                    .ok());
    delete db;
  }
  auto cat = Catalog::Open(path);
  ASSERT_TRUE(cat.ok());
  EXPECT_EQ((*cat)->Get("j", 4).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace strata::checkpoint

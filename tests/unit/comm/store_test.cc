#include "comm/store.h"

#include <thread>

#include "gtest/gtest.h"

namespace strata::comm {
namespace {

using std::chrono::milliseconds;

TEST(InMemoryStoreTest, GetWaitsForSetFromAnotherThread) {
  auto store = NewInMemoryStore();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(store->Set("addr/1", "10.0.0.1:29500").ok());
  });
  auto v = store->Get("addr/1", milliseconds(5000));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "10.0.0.1:29500");
}

TEST(InMemoryStoreTest, TimeoutNamesMissingKeys) {
  auto store = NewInMemoryStore();
  ASSERT_TRUE(store->Set("a", "1").ok());
  Status st = store->Wait({"a", "b"}, milliseconds(10));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("b"), std::string::npos);
  EXPECT_EQ(st.message().find("a,"), std::string::npos);
}

TEST(InMemoryStoreTest, AddIsAtomicAcrossThreads) {
  auto store = NewInMemoryStore();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(store->Add("n", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*store->Add("n", 0), 4000);
  ASSERT_TRUE(store->Set("s", "x").ok());
  EXPECT_EQ(store->Add("s", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PrefixStoreTest, KeysAreIsolatedByPrefix) {
  auto base = NewInMemoryStore();
  auto a = NewPrefixStore("job1", base);
  auto b = NewPrefixStore("job2", base);
  ASSERT_TRUE(a->Set("k", "1").ok());
  EXPECT_TRUE(*a->Check("k"));
  EXPECT_FALSE(*b->Check("k"));
  EXPECT_TRUE(*base->Check("job1/k"));
}

}  // namespace
}  // namespace strata::comm

#include "comm/store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

namespace strata::comm {
namespace {

int tcp_test_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  return fd;
}

void ExerciseStore(Store& a, Store& b) {
  ASSERT_TRUE(a.Set("k/1", std::string("v\0x", 3)).ok());
  auto v = b.Get("k/1", std::chrono::milliseconds(1000));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, std::string("v\0x", 3));
  EXPECT_EQ(*a.Add("n", 2), 2);
  EXPECT_EQ(*b.Add("n", 3), 5);
  EXPECT_TRUE(*b.Check("k/1"));
  EXPECT_FALSE(*b.Check("nope"));
  Status st = b.Wait({"k/1", "missing"}, std::chrono::milliseconds(20));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("missing"), std::string::npos) << st;
  ASSERT_TRUE(a.Delete("k/1").ok());
  EXPECT_FALSE(*b.Check("k/1"));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ASSERT_TRUE(a.Set("late", "x").ok());
  });
  EXPECT_TRUE(b.Get("late", std::chrono::milliseconds(5000)).ok());
  later.join();
}

TEST(FileStoreTest, SharedThroughADirectory) {
  std::string tmpl = ::testing::TempDir() + "/filestore_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  auto a = NewFileStore(dir);
  auto b = NewFileStore(dir);
  ASSERT_TRUE(a.ok() && b.ok());
  ExerciseStore(**a, **b);
}

TEST(TcpStoreTest, ClientsShareTheServersState) {
  auto server = StartTcpStoreServer("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto a = ConnectTcpStore("127.0.0.1", (*server)->port());
  auto b = ConnectTcpStore("127.0.0.1", (*server)->port());
  ASSERT_TRUE(a.ok() && b.ok());
  ExerciseStore(**a, **b);
}

TEST(TcpStoreTest, GarbageFromAClientDoesNotHurtTheServer) {
  auto server = StartTcpStoreServer("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  {
    auto fd = tcp_test_connect((*server)->port());
    const uint32_t huge[2] = {1, 0xffffffffu};  // one part of 4 GiB
    ASSERT_EQ(write(fd, huge, sizeof(huge)),
              static_cast<ssize_t>(sizeof(huge)));
    close(fd);
  }
  auto c = ConnectTcpStore("127.0.0.1", (*server)->port());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->Set("still", "alive").ok());
  EXPECT_EQ(*(*c)->Get("still", std::chrono::milliseconds(100)), "alive");
}

TEST(TcpStoreTest, DeadServerIsUnavailable) {
  auto server = StartTcpStoreServer("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto c = ConnectTcpStore("127.0.0.1", (*server)->port());
  ASSERT_TRUE(c.ok());
  (*server)->Stop();
  EXPECT_EQ((*c)->Set("k", "v").code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace strata::comm

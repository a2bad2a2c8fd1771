// Remote parties cannot flood the logs. 50 connections sending garbage bytes
// and 50 ZeroMQ connections sending garbage frames to a real
// strata-coordinator, and 50 garbage connections to the listeners ranks
// host (a TCP store server, a TCP transport's rendezvous port), must produce a
// bounded number of log lines — the first few per peer and kind, then
// "suppressed K similar messages from PEER" summaries (at the latest when the
// coordinator stops) — and the servers must still answer afterwards.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "comm/store.h"
#include "comm/tcp/tcp_transport.h"
#include "common/logging.h"
#include "common/net.h"
#include "control/dealer_client.h"
#include "spdlog/sinks/ostream_sink.h"
#include "tests/integration/control/process_util.h"

namespace strata {
namespace {

using strata::testing::ProcessReaper;
using strata::testing::Spawn;

constexpr int kConnections = 50;
// What the logs may hold for 50 hostile connections from one host: a few
// lines per kind of rejection plus their summaries.
constexpr int kMaxCoordinatorLines = 60;
constexpr int kMaxStoreLines = 10;

std::string Garbage(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Opens a TCP connection to 127.0.0.1:port, writes `bytes`, closes it.
void SendRaw(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    (void)!write(fd, bytes.data(), bytes.size());
    // Give the server a moment to read before the connection resets.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(fd);
}

std::vector<std::string> LinesFrom(const std::string& path, size_t offset) {
  std::ifstream in(path);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string Join(const std::vector<std::string>& lines, size_t max) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < max; ++i) out += lines[i] + "\n";
  return out;
}

TEST(LogFloodTest, GarbageConnectionsToTheCoordinatorLogBoundedLines) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  ASSERT_NE(bin, nullptr);
  const std::string dir = "/tmp/strata-log-flood-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto port = net::PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(*port);
  const std::string log = dir + "/coordinator.log";
  pid_t coord = Spawn({std::string(bin) + "/coordinator/strata-coordinator",
                       "--state-dir", dir + "/state", "--listen", endpoint},
                      log);
  ProcessReaper reaper;
  reaper.Watch(&coord);
  zmq::context_t ctx;
  control::DealerClient client(&ctx, endpoint);
  control::Request list;
  list.mutable_list_jobs();
  auto up = absl::StatusOr<control::Reply>(absl::UnavailableError("not yet"));
  for (int i = 0; i < 50 && !up.ok(); ++i) up = client.Call(list, 200);
  ASSERT_TRUE(up.ok()) << up.status();
  const size_t start = std::filesystem::file_size(log);

  std::mt19937 rng(42);
  // Raw garbage: not even a ZMTP greeting.
  for (int i = 0; i < kConnections; ++i) SendRaw(*port, Garbage(rng, 4096));
  // Well-formed ZMTP connections carrying garbage: single frames that do
  // not decode and multi-frame messages.
  for (int i = 0; i < kConnections; ++i) {
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 1000);
    dealer.connect(endpoint);
    for (int m = 0; m < 10; ++m) {
      dealer.send(zmq::buffer(Garbage(rng, 1 + rng() % 200)),
                  zmq::send_flags::none);
      dealer.send(zmq::buffer(Garbage(rng, 8)), zmq::send_flags::sndmore);
      dealer.send(zmq::buffer(Garbage(rng, 8)), zmq::send_flags::none);
    }
    dealer.close();  // lingers until sent
  }
  // The coordinator still answers, after having read all of it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  auto after = client.Call(list, 5000);
  ASSERT_TRUE(after.ok()) << after.status();
  // A clean stop logs what was suppressed.
  ASSERT_EQ(kill(coord, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(coord, &status, 0), coord);
  coord = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  const auto lines = LinesFrom(log, start);
  std::cerr << "coordinator logged " << lines.size() << " lines for "
            << 2 * kConnections << " hostile connections\n";
  EXPECT_LE(static_cast<int>(lines.size()), kMaxCoordinatorLines)
      << Join(lines, 20);
  // The rejections were seen and the flood was summarized, naming the peer.
  bool summary = false;
  for (const auto& l : lines) {
    summary = summary || (l.find("suppressed") != std::string::npos &&
                          l.find("127.0.0.1") != std::string::npos);
  }
  EXPECT_TRUE(summary) << Join(lines, 30);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

TEST(LogFloodTest, GarbageConnectionsToATcpStoreLogBoundedLines) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  Logger comm = GetLogger("COMM");
  comm->sinks().push_back(sink);
  auto server = comm::StartTcpStoreServer("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  std::mt19937 rng(7);
  for (int i = 0; i < kConnections; ++i) {
    // A frame header announcing 0xffffffff parts: refused at once.
    std::string bytes(4, '\xff');
    bytes += Garbage(rng, 64);
    SendRaw((*server)->port(), bytes);
  }
  // Still serving.
  auto store = comm::ConnectTcpStore("127.0.0.1", (*server)->port(),
                                     std::chrono::seconds(5));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("k", "v").ok());
  EXPECT_EQ(*(*store)->Get("k", std::chrono::seconds(1)), "v");
  (*server)->Stop();
  comm->sinks().pop_back();

  std::vector<std::string> lines;
  std::istringstream in(captured.str());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::cerr << "tcp store logged " << lines.size() << " lines for "
            << kConnections << " garbage connections\n";
  EXPECT_GE(lines.size(), 1u);  // the garbage is not silently ignored
  EXPECT_LE(static_cast<int>(lines.size()), kMaxStoreLines) << Join(lines, 20);
  EXPECT_NE(captured.str().find("127.0.0.1"), std::string::npos)
      << "the peer is named: " << Join(lines, 5);
}

// The transport's listener during rendezvous: garbage connections are
// ignored with a rate-limited warning naming the peer, and the real peer
// still gets in.
TEST(LogFloodTest, GarbageConnectionsToATcpTransportLogBoundedLines) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  Logger comm = GetLogger("COMM");
  comm->sinks().push_back(sink);
  std::shared_ptr<comm::Store> store = comm::NewInMemoryStore();
  comm::TcpOptions opts;
  opts.streams = 1;
  opts.connect_timeout = std::chrono::seconds(20);
  StatusOr<std::unique_ptr<comm::Transport>> rank0 =
      absl::UnavailableError("not run");
  std::thread t0([&] { rank0 = comm::ConnectTcpTransport(store, 0, 2, opts); });
  auto addr = store->Get("tcp/addr/0", std::chrono::seconds(10));
  ASSERT_TRUE(addr.ok()) << addr.status();
  const int port = std::stoi(addr->substr(addr->find(':') + 1));
  for (int i = 0; i < kConnections; ++i) SendRaw(port, "GARBAGE!");
  auto rank1 = comm::ConnectTcpTransport(store, 1, 2, opts);
  t0.join();
  comm->sinks().pop_back();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();

  std::vector<std::string> lines;
  std::istringstream in(captured.str());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::cerr << "tcp transport logged " << lines.size() << " lines for "
            << kConnections << " garbage connections\n";
  EXPECT_GE(lines.size(), 1u);  // the garbage is not silently ignored
  EXPECT_LE(static_cast<int>(lines.size()), kMaxStoreLines) << Join(lines, 20);
  EXPECT_NE(captured.str().find("from 127.0.0.1"), std::string::npos)
      << Join(lines, 5);
}

}  // namespace
}  // namespace strata

// The HTTP listener's bounds, with raw sockets over loopback: head size
// limits, the per-request and per-connection budgets, and /metrics staying
// answerable under 50 hostile clients (issue 34).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "observe/http_server.h"

namespace strata::observe {
namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, HttpHandler> Routes() {
  return {{"/metrics", [](const HttpRequest&) {
             HttpResponse out;
             out.body = "strata_up 1\n";
             return out;
           }}};
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  for (size_t off = 0; off < s.size();) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += n;
  }
  return true;
}

// Reads one reply (head + Content-Length body) within `timeout_ms`; "" on
// timeout or a closed connection before a full reply.
std::string ReadReply(int fd, int timeout_ms) {
  std::string in;
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < end) {
    const size_t head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const size_t cl = in.find("Content-Length: ");
      const size_t length = cl == std::string::npos
                                ? 0
                                : std::stoul(in.substr(cl + 16));
      if (in.size() >= head_end + 4 + length) return in;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "";
    in.append(buf, n);
  }
  return "";
}

// True once the peer has closed `fd` (recv returns 0 or an error).
bool ClosedWithin(int fd, int timeout_ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    if (recv(fd, buf, sizeof(buf), 0) <= 0) return true;
  }
  return false;
}

int StatusOf(const std::string& reply) {
  return reply.size() > 12 ? std::stoi(reply.substr(9, 3)) : 0;
}

int64_t RssKb() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST(HttpLimitsTest, HeadLimitsGet431And414) {
  auto server = HttpServer::Start({}, Routes());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  int fd = Connect(port);
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nX-Big: " +
                              std::string(20000, 'a') + "\r\n\r\n"));
  std::string r = ReadReply(fd, 2000);
  EXPECT_EQ(StatusOf(r), 431) << r;
  EXPECT_NE(r.find("16384 bytes"), std::string::npos) << r;
  EXPECT_TRUE(ClosedWithin(fd, 2000));
  close(fd);

  fd = Connect(port);
  ASSERT_TRUE(SendAll(fd, "GET /" + std::string(9000, 'a') + " HTTP/1.1"));
  r = ReadReply(fd, 2000);
  EXPECT_EQ(StatusOf(r), 414) << r;
  close(fd);

  fd = Connect(port);
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(StatusOf(ReadReply(fd, 2000)), 200);
  close(fd);
  EXPECT_GE((*server)->stats().refused, 2u);
}

TEST(HttpLimitsTest, SlowHeadsAndIdleConnectionsAreCut) {
  HttpServerOptions o;
  o.header_timeout_ms = 300;
  o.idle_timeout_ms = 200;
  auto server = HttpServer::Start(o, Routes());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // Slow-loris: one byte every 50 ms, never the blank line.
  const int slow = Connect(port);
  const auto t0 = Clock::now();
  bool cut = false;
  const std::string head = "GET /metrics HTTP/1.1\r\nX: aaaaaaaaaaaaaaaa";
  for (size_t i = 0; i < head.size() && !cut; ++i) {
    cut = !SendAll(slow, head.substr(i, 1));
    pollfd p{slow, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) break;  // the 408 arrived
  }
  const std::string r = ReadReply(slow, 2000);
  const double ms = std::chrono::duration<double, std::milli>(
                        Clock::now() - t0).count();
  EXPECT_EQ(StatusOf(r), 408) << r;
  EXPECT_LT(ms, 1500);
  EXPECT_TRUE(ClosedWithin(slow, 1000));
  close(slow);
  // An idle connection that never sends is closed after the idle timeout.
  const int idle = Connect(port);
  EXPECT_TRUE(ClosedWithin(idle, 2000));
  close(idle);
  EXPECT_GE((*server)->stats().timed_out, 1u);
}

TEST(HttpLimitsTest, AConnectionServesABoundedNumberOfRequests) {
  HttpServerOptions o;
  o.max_requests_per_connection = 3;
  auto server = HttpServer::Start(o, Routes());
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = Connect((*server)->port());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n"));
    const std::string r = ReadReply(fd, 2000);
    EXPECT_EQ(StatusOf(r), 200) << i;
    EXPECT_NE(r.find(i < 3 ? "Connection: keep-alive" : "Connection: close"),
              std::string::npos)
        << i << r;
  }
  EXPECT_TRUE(ClosedWithin(fd, 1000));
  close(fd);
  // Pipelined requests are answered in order on one connection.
  const int p = Connect((*server)->port());
  ASSERT_TRUE(SendAll(p, "HEAD /metrics HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n"
                         "Connection: close\r\n\r\n"));
  std::string both;
  char buf[4096];
  for (ssize_t n; (n = recv(p, buf, sizeof(buf), 0)) > 0;) both.append(buf, n);
  EXPECT_EQ(both.find("HTTP/1.1 200"), 0u) << both;
  EXPECT_NE(both.find("HTTP/1.1 404"), std::string::npos) << both;
  EXPECT_EQ(both.find("strata_up"), std::string::npos);  // HEAD: no body
  close(p);
}

TEST(HttpLimitsTest, BeyondMaxConnectionsTheOldestIdleYields) {
  HttpServerOptions o;
  o.max_connections = 8;
  auto server = HttpServer::Start(o, Routes());
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(Connect((*server)->port()));
  const int fd = Connect((*server)->port());
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(StatusOf(ReadReply(fd, 1000)), 200);
  close(fd);
  EXPECT_TRUE(ClosedWithin(idle.front(), 1000));
  for (int f : idle) close(f);
  EXPECT_GE((*server)->stats().evicted, 13u);
}

// A route whose handler blocks (as the trace download waits for the event
// loop) never takes every handler thread: with 2 threads and 4 clients
// asking for it, /metrics still answers at once.
TEST(HttpLimitsTest, ABlockingRouteLeavesAThreadToTheOthers) {
  HttpServerOptions o;
  o.threads = 2;
  auto routes = Routes();
  routes["/slow"] = [](const HttpRequest&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return HttpResponse{};
  };
  auto server = HttpServer::Start(o, routes);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::vector<int> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(Connect(port));
    ASSERT_TRUE(SendAll(slow.back(), "GET /slow HTTP/1.1\r\n\r\n"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = Clock::now();
  const int fd = Connect(port);
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(StatusOf(ReadReply(fd, 3000)), 200);
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_LT(ms, 300);
  close(fd);
  for (int f : slow) {
    EXPECT_EQ(StatusOf(ReadReply(f, 5000)), 200);  // served one at a time
    close(f);
  }
}

// The test: 50 clients (20 slow-loris, 29 keep-alive sending a
// request every 0.5 s, 1 sending 80 MB of headers) against the
// coordinator's settings (4 handler threads, default limits) for 4 s:
// /metrics, asked on a fresh connection every 100 ms, answers within 1 s
// every time, and the process's RSS grows by less than 8 MB.
TEST(HttpLimitsTest, FiftyHostileClientsCannotStarveMetrics) {
  HttpServerOptions o;
  o.threads = 4;
  auto server = HttpServer::Start(o, Routes());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> big_sent{0};
  std::atomic<int> keep_alive_ok{0}, keep_alive_failed{0};
  const int64_t rss0 = RssKb();
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i) {
    clients.emplace_back([&] {  // slow-loris: a byte every 200 ms
      int fd = Connect(port);
      const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: ";
      for (size_t k = 0; !stop; ++k) {
        if (fd < 0 || !SendAll(fd, std::string(1, head[k % head.size()]))) {
          if (fd >= 0) close(fd);
          fd = Connect(port);  // cut: come back
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      if (fd >= 0) close(fd);
    });
  }
  for (int i = 0; i < 29; ++i) {
    clients.emplace_back([&] {  // keep-alive, a request every 0.5 s
      int fd = Connect(port);
      while (!stop) {
        if (fd < 0 || !SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n") ||
            StatusOf(ReadReply(fd, 2000)) != 200) {
          ++keep_alive_failed;
          if (fd >= 0) close(fd);
          fd = Connect(port);
        } else {
          ++keep_alive_ok;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      if (fd >= 0) close(fd);
    });
  }
  clients.emplace_back([&] {  // 80 MB of header fields, 64 KiB at a time
    const std::string chunk = "X-Big: " + std::string(65536 - 9, 'b') + "\r\n";
    int fd = Connect(port);
    SendAll(fd, "GET /metrics HTTP/1.1\r\n");
    while (!stop && big_sent < (int64_t{80} << 20)) {
      if (!SendAll(fd, chunk)) {  // refused and closed: try again
        close(fd);
        fd = Connect(port);
        if (!SendAll(fd, "GET /metrics HTTP/1.1\r\n")) continue;
      }
      big_sent += chunk.size();
    }
    close(fd);
  });
  double worst_ms = 0;
  int asked = 0, answered = 0;
  const auto end = Clock::now() + std::chrono::seconds(4);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    const int fd = Connect(port);
    if (fd >= 0 && SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n") &&
        StatusOf(ReadReply(fd, 3000)) == 200) {
      ++answered;
    }
    if (fd >= 0) close(fd);
    ++asked;
    worst_ms = std::max(worst_ms, std::chrono::duration<double, std::milli>(
                                      Clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int64_t rss1 = RssKb();
  stop = true;
  for (auto& t : clients) t.join();
  const HttpServerStats s = (*server)->stats();
  std::printf(
      "/metrics: %d/%d answered, worst %.1f ms; keep-alive replies %d ok, %d "
      "failed; big-header client sent %.1f MB; RSS %+.1f MB; accepted %lu, "
      "refused %lu, timed out %lu, evicted %lu\n",
      answered, asked, worst_ms, keep_alive_ok.load(),
      keep_alive_failed.load(), big_sent / 1048576.0, (rss1 - rss0) / 1024.0,
      s.accepted, s.refused, s.timed_out, s.evicted);
  EXPECT_EQ(answered, asked);
  EXPECT_LT(worst_ms, 1000);
  EXPECT_GT(keep_alive_ok, 29 * 4);
  EXPECT_EQ(keep_alive_failed, 0);
  EXPECT_GE(big_sent, int64_t{80} << 20);  // it did send its 80 MB
  EXPECT_GE(s.refused, 1u);                // ... and was refused (431)
  EXPECT_LT(rss1 - rss0, 8 * 1024);
}

}  // namespace
}  // namespace strata::observe

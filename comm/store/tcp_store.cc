// TCP store. Wire format (docs/comm.md): every message is a frame
//   u32 n, then n times (u32 len, len bytes)        (little-endian)
// Requests: ["set", k, v] ["get", k, timeout_ms] ["add", k, delta]
//           ["wait", timeout_ms, k1, k2, ...] ["check", k] ["delete", k]
// Replies:  [code, message-or-value]; code is the decimal absl status code.
// The server runs one thread per client over an in-memory store, so blocking
// get/wait calls of one client never stall another. Frames above 64 MiB or
// malformed frames close that connection, with a warning naming the peer,
// rate-limited per peer address (common/log_limiter.h).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/store.h"
#include "comm/tcp/socket.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace strata::comm {
namespace {

constexpr uint32_t kMaxFrameBytes = 64u << 20;
constexpr int kIoTimeoutMs = 1 << 30;

Status WriteFrame(int fd, const std::vector<std::string>& parts) {
  std::string buf;
  auto put32 = [&](uint32_t v) { buf.append(reinterpret_cast<char*>(&v), 4); };
  put32(static_cast<uint32_t>(parts.size()));
  for (const auto& p : parts) {
    put32(static_cast<uint32_t>(p.size()));
    buf += p;
  }
  return tcp::WriteAll(fd, buf.data(), buf.size(), kIoTimeoutMs);
}

StatusOr<std::vector<std::string>> ReadFrame(int fd, int timeout_ms) {
  uint32_t n = 0;
  RETURN_IF_ERROR(tcp::ReadAll(fd, &n, 4, timeout_ms));
  if (n > 1024) return absl::InvalidArgumentError("frame has too many parts");
  std::vector<std::string> parts(n);
  uint64_t total = 0;
  for (auto& p : parts) {
    uint32_t len = 0;
    RETURN_IF_ERROR(tcp::ReadAll(fd, &len, 4, timeout_ms));
    total += len;
    if (total > kMaxFrameBytes)
      return absl::InvalidArgumentError("frame too large");
    p.resize(len);
    RETURN_IF_ERROR(tcp::ReadAll(fd, p.data(), len, timeout_ms));
  }
  return parts;
}

std::vector<std::string> Reply(const Status& st, std::string value = "") {
  return {std::to_string(static_cast<int>(st.code())),
          st.ok() ? std::move(value) : std::string(st.message())};
}

std::vector<std::string> Serve(Store& store,
                               const std::vector<std::string>& req) {
  auto ms = [](const std::string& s) {
    int64_t v = 0;
    return absl::SimpleAtoi(s, &v) ? std::chrono::milliseconds(v)
                                   : std::chrono::milliseconds(-1);
  };
  if (req.empty()) return Reply(absl::InvalidArgumentError("empty request"));
  const std::string& op = req[0];
  if (op == "set" && req.size() == 3) return Reply(store.Set(req[1], req[2]));
  if (op == "get" && req.size() == 3 && ms(req[2]).count() >= 0) {
    auto v = store.Get(req[1], ms(req[2]));
    return v.ok() ? Reply(absl::OkStatus(), *v) : Reply(v.status());
  }
  int64_t delta = 0;
  if (op == "add" && req.size() == 3 && absl::SimpleAtoi(req[2], &delta)) {
    auto v = store.Add(req[1], delta);
    return v.ok() ? Reply(absl::OkStatus(), std::to_string(*v))
                  : Reply(v.status());
  }
  if (op == "wait" && req.size() >= 2 && ms(req[1]).count() >= 0) {
    return Reply(store.Wait({req.begin() + 2, req.end()}, ms(req[1])));
  }
  if (op == "check" && req.size() == 2) {
    auto v = store.Check(req[1]);
    return v.ok() ? Reply(absl::OkStatus(), *v ? "1" : "0") : Reply(v.status());
  }
  if (op == "delete" && req.size() == 2) return Reply(store.Delete(req[1]));
  return Reply(
      absl::InvalidArgumentError("malformed store request '" + op + "'"));
}

class Server final : public TcpStoreServer {
 public:
  Server(int fd, int port)
      : fd_(fd),
        port_(port),
        store_(NewInMemoryStore()),
        limiter_(GetLogger("COMM")) {
    thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~Server() override { Stop(); }
  int port() const override { return port_; }
  void Stop() override {
    if (stopping_.exchange(true)) return;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
    MutexLock lock(mu_);
    for (auto& [cfd, t] : clients_) shutdown(cfd, SHUT_RDWR);
    for (auto& [cfd, t] : clients_) {
      t.join();
      close(cfd);
    }
    limiter_.FlushAll();
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      limiter_.Flush();  // summaries of floods that stopped
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int cfd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (cfd < 0) continue;
      tcp::SetNoDelay(cfd);
      MutexLock lock(mu_);
      clients_.emplace_back(cfd, std::thread([this, cfd] { ClientLoop(cfd); }));
    }
  }
  void ClientLoop(int cfd) {
    while (!stopping_) {
      auto req = ReadFrame(cfd, kIoTimeoutMs);
      if (!req.ok()) {
        if (req.status().code() == absl::StatusCode::kInvalidArgument) {
          const std::string peer = tcp::PeerAddress(cfd);
          limiter_.Warn(peer, "bad frame", "tcp store: dropping client {}: {}",
                        peer, std::string(req.status().message()));
        }
        return;
      }
      if (!WriteFrame(cfd, Serve(*store_, *req)).ok()) return;
    }
  }

  int fd_, port_;
  std::shared_ptr<Store> store_;
  LogLimiter limiter_;  // shared by the client threads (thread-safe)
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  Mutex mu_;
  std::list<std::pair<int, std::thread>> clients_ ABSL_GUARDED_BY(mu_);
};

class Client final : public Store {
 public:
  explicit Client(int fd) : fd_(fd) {}
  ~Client() override { close(fd_); }

  Status Set(const std::string& k, const std::string& v) override {
    return Call({"set", k, v}).status();
  }
  StatusOr<std::string> Get(const std::string& k, Duration timeout) override {
    return Call({"get", k, std::to_string(timeout.count())});
  }
  StatusOr<int64_t> Add(const std::string& k, int64_t delta) override {
    ASSIGN_OR_RETURN(std::string v, Call({"add", k, std::to_string(delta)}));
    int64_t out = 0;
    if (!absl::SimpleAtoi(v, &out)) return absl::DataLossError("bad add reply");
    return out;
  }
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    std::vector<std::string> req = {"wait", std::to_string(timeout.count())};
    req.insert(req.end(), keys.begin(), keys.end());
    return Call(req).status();
  }
  StatusOr<bool> Check(const std::string& k) override {
    ASSIGN_OR_RETURN(std::string v, Call({"check", k}));
    return v == "1";
  }
  Status Delete(const std::string& k) override {
    return Call({"delete", k}).status();
  }

 private:
  StatusOr<std::string> Call(const std::vector<std::string>& req) {
    MutexLock lock(mu_);
    Status st = WriteFrame(fd_, req);
    if (!st.ok())
      return absl::UnavailableError("tcp store: " + std::string(st.message()));
    auto reply = ReadFrame(fd_, kIoTimeoutMs);
    if (!reply.ok()) {
      return absl::UnavailableError("tcp store: " +
                                    std::string(reply.status().message()));
    }
    int code = 0;
    if (reply->size() != 2 || !absl::SimpleAtoi((*reply)[0], &code)) {
      return absl::DataLossError("tcp store: malformed reply");
    }
    if (code != 0)
      return Status(static_cast<absl::StatusCode>(code), (*reply)[1]);
    return (*reply)[1];
  }

  int fd_;
  Mutex mu_;
};

}  // namespace

StatusOr<std::unique_ptr<TcpStoreServer>> StartTcpStoreServer(
    const std::string& bind_addr, int port) {
  ASSIGN_OR_RETURN(std::string host, tcp::ResolveBindAddress(bind_addr));
  ASSIGN_OR_RETURN(auto listener, tcp::Listen(host, port));
  return std::unique_ptr<TcpStoreServer>(
      std::make_unique<Server>(listener.first, listener.second));
}

StatusOr<std::shared_ptr<Store>> ConnectTcpStore(
    const std::string& host, int port, std::chrono::milliseconds timeout) {
  // Connects in slices so that a store that is not up yet is reported while
  // waiting (a launcher may start it after its ranks), with the cause.
  using SteadyClock = std::chrono::steady_clock;
  constexpr auto kSlice = std::chrono::seconds(2);
  constexpr auto kReportEvery = std::chrono::seconds(10);
  const auto start = SteadyClock::now(), end = start + timeout;
  auto next_report = start + kSlice;
  auto seconds = [&](SteadyClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t - start).count();
  };
  for (;;) {
    const auto now = SteadyClock::now();
    const auto slice = std::min<SteadyClock::duration>(
        std::max<SteadyClock::duration>(end - now, SteadyClock::duration(0)),
        kSlice);
    auto fd = tcp::Connect(
        host, port,
        static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(slice)
                .count()));
    if (fd.ok()) return std::shared_ptr<Store>(std::make_shared<Client>(*fd));
    if (!absl::IsDeadlineExceeded(fd.status())) return fd.status();
    // "connect to H:P failed: Connection refused": keep the cause.
    const std::string msg(fd.status().message());
    const size_t colon = msg.rfind(": ");
    const std::string cause =
        colon == std::string::npos ? msg : msg.substr(colon + 2);
    const auto after = SteadyClock::now();
    if (after >= end) {
      return absl::UnavailableError(absl::StrCat(
          "tcp store ", host, ":", port, " did not accept a connection in ",
          seconds(after), " s (", cause,
          "); is the store server (the launcher, or rank 0's host) running "
          "and STRATA_STORE right?"));
    }
    if (after >= next_report) {
      GetLogger("COMM")->warn("waiting for store {}:{} ({}), {}s of {}", host,
                              port, cause, seconds(after), seconds(end));
      next_report = after + kReportEvery;
    }
  }
}

}  // namespace strata::comm

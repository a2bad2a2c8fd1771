#include "observe/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "observe/http/reply.h"
#include "observe/http/request_head.h"

namespace strata::observe {
namespace {

// Compares without an early exit, so response time does not tell how much
// of a guessed token was right.
bool SameToken(const std::string& a, const std::string& b) {
  unsigned diff = a.size() ^ b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % (b.size() + 1)];
  return diff == 0;
}

std::string TokenOf(const http::RequestHead& head) {
  const std::string auth = head.Field("authorization").value_or("");
  if (auth.rfind("Bearer ", 0) == 0) return auth.substr(7);
  auto it = head.params.find("token");
  return it == head.params.end() ? "" : it->second;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string PeerOf(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  char host[INET6_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    if (a.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, host,
                sizeof(host));
    } else if (a.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr,
                host, sizeof(host));
    }
  }
  return host;
}

// A listening socket on host:port (port 0: any free one), SO_REUSEADDR
// only: with SO_REUSEPORT a second coordinator would silently share (and
// split) the port. -1 if none of the host's addresses binds.
int Listen(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                  &hints, &found) != 0) {
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound_port = ntohs(a.ss_family == AF_INET6
                          ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                          : reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return fd;
}

}  // namespace

// One I/O thread multiplexes every connection with epoll (level-triggered)
// and never blocks on a client; `threads` handler threads run the routes'
// handlers on complete, authorised requests and hand the serialised reply
// back through `done_` and an eventfd.
//
// Invariants: every entry of `conns_` owns an open socket registered with
// epoll under its id (ids are never reused); ids of `jobs_` and `done_` are
// ids of connections in State::kHandling when queued, and a reply whose
// connection was closed meanwhile is dropped; a connection has at most one
// request queued or running, so `jobs_` holds at most max_connections
// entries; keys of `running_` are handlers of `routes_` with a request
// running.
class HttpServer::Loop {
 public:
  Loop(const HttpServerOptions& o, std::map<std::string, HttpHandler> routes,
       int listen_fd);
  ~Loop();
  HttpServerStats stats() const;

 private:
  enum class State { kReading, kHandling, kWriting, kDraining };
  struct Conn {
    int fd = -1;
    std::string peer;
    std::string in;  // unparsed input, at most max_header_bytes + kChunk
    std::string out;
    size_t out_off = 0;
    State state = State::kReading;
    bool head_started = false;  // bytes of the next head have arrived
    bool keep_alive = true;     // after the reply being written
    bool drain = false;         // after the reply: half-close and discard
    size_t drained = 0;
    int served = 0;
    int64_t opened_ms = 0;
    int64_t active_ms = 0;    // last byte read or written
    int64_t deadline_ms = 0;  // not in kHandling
  };
  struct Job {
    uint64_t id;
    http::RequestHead head;
    const HttpHandler* handler;
    http::ReplyOptions reply;
  };
  struct Done {
    uint64_t id;
    std::string bytes;
    bool keep_alive;
  };
  static constexpr size_t kChunk = 4096;
  static constexpr size_t kMaxDrainBytes = 1 << 20;
  static constexpr int64_t kDrainMs = 1000;
  static constexpr uint64_t kListenId = 0, kWakeId = 1;

  void Run();
  void Work();
  void Accept(int64_t now);
  void OnEvent(uint64_t id, uint32_t events, int64_t now);
  void Read(uint64_t id, Conn& c, int64_t now);
  void Parse(uint64_t id, Conn& c, int64_t now);
  void Route(uint64_t id, Conn& c, http::RequestHead head, int64_t now);
  void Refuse(uint64_t id, Conn& c, http::Reply reply, bool keep_alive,
              bool head_only, int64_t now);
  void StartWrite(uint64_t id, Conn& c, std::string bytes, bool keep_alive,
                  int64_t now);
  void Write(uint64_t id, Conn& c, int64_t now);
  void Watch(uint64_t id, const Conn& c, uint32_t events);
  void Close(uint64_t id);
  void Expire(int64_t now);
  void TakeDone(int64_t now);
  // The oldest queued job whose route holds fewer than threads - 1 (at
  // least 1) handler threads; jobs_.end() if none.
  std::deque<Job>::iterator Runnable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HttpServerOptions o_;
  const std::map<std::string, HttpHandler> routes_;
  std::string known_;  // " /a /b": for 404s
  const http::HeadLimits limits_;
  int listen_fd_;
  int epoll_fd_;
  int wake_fd_;
  Logger log_;
  LogLimiter limited_;

  // I/O thread only.
  std::unordered_map<uint64_t, Conn> conns_;
  uint64_t next_id_ = 2;

  mutable Mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  // Handler threads busy per route; keys: routes with a running request.
  std::map<const HttpHandler*, int> running_ ABSL_GUARDED_BY(mu_);
  const int workers_cap_;  // handler threads
  std::vector<Done> done_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  HttpServerStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread io_;
  std::vector<std::thread> workers_;
};

HttpServer::Loop::Loop(const HttpServerOptions& o,
                       std::map<std::string, HttpHandler> routes,
                       int listen_fd)
    : o_(o),
      routes_(std::move(routes)),
      limits_{.max_request_line_bytes = o.max_request_line_bytes,
              .max_head_bytes = o.max_header_bytes},
      listen_fd_(listen_fd),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      log_(GetLogger("OBSERVE")),
      limited_(log_),
      workers_cap_(std::max(1, o.threads)) {
  for (const auto& [path, h] : routes_) absl::StrAppend(&known_, " ", path);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  io_ = std::thread([this] { Run(); });
  for (int i = 0; i < workers_cap_; ++i)
    workers_.emplace_back([this] { Work(); });
}

HttpServer::Loop::~Loop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  io_.join();
  for (auto& t : workers_) t.join();
  for (auto& [id, c] : conns_) close(c.fd);
  close(listen_fd_);
  close(wake_fd_);
  close(epoll_fd_);
  limited_.FlushAll();
}

HttpServerStats HttpServer::Loop::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void HttpServer::Loop::Run() {
  epoll_event events[64];
  int64_t next_scan = 0;
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    // 50 ms: the resolution of every deadline below.
    const int n = epoll_wait(epoll_fd_, events, 64, 50);
    const int64_t now = NowMs();
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        Accept(now);
      } else if (id == kWakeId) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof(count));
        TakeDone(now);
      } else {
        OnEvent(id, events[i].events, now);
      }
    }
    if (now >= next_scan) {
      Expire(now);
      limited_.Flush();
      next_scan = now + 50;
    }
  }
}

void HttpServer::Loop::Accept(int64_t now) {
  // Bounded per wake-up so a connection flood cannot starve the others.
  for (int i = 0; i < 256; ++i) {
    const int fd = accept4(listen_fd_, nullptr, nullptr,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or EMFILE: retried on the next wake-up
    if (static_cast<int>(conns_.size()) >= o_.max_connections) {
      // Make room: the least recently active connection that holds no
      // handler thread (idle keep-alive, a slow head, a drain).
      uint64_t oldest = 0;
      int64_t oldest_ms = 0;
      for (const auto& [cid, c] : conns_) {
        if (c.state == State::kHandling || c.state == State::kWriting)
          continue;
        if (oldest == 0 || c.active_ms < oldest_ms ||
            (c.active_ms == oldest_ms && cid < oldest)) {
          oldest = cid;
          oldest_ms = c.active_ms;
        }
      }
      if (oldest == 0) {
        close(fd);
        continue;
      }
      limited_.Log(spdlog::level::info, conns_[oldest].peer, "evicted",
                   "http: closed a connection from {} to make room ({} open)",
                   conns_[oldest].peer, conns_.size());
      Close(oldest);
      MutexLock lock(mu_);
      ++stats_.evicted;
    }
    const uint64_t id = next_id_++;
    Conn& c = conns_[id];
    c.fd = fd;
    c.peer = PeerOf(fd);
    c.opened_ms = c.active_ms = now;
    c.deadline_ms = now + o_.idle_timeout_ms;
    Watch(id, c, EPOLLIN);
    MutexLock lock(mu_);
    ++stats_.accepted;
  }
}

void HttpServer::Loop::Watch(uint64_t id, const Conn& c, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) != 0)
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
}

void HttpServer::Loop::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  close(it->second.fd);
  conns_.erase(it);
}

void HttpServer::Loop::OnEvent(uint64_t id, uint32_t events, int64_t now) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  if ((events & (EPOLLERR | EPOLLHUP)) && c.state != State::kWriting &&
      c.state != State::kReading && c.state != State::kDraining) {
    return Close(id);  // the client went away while a handler runs
  }
  if (c.state == State::kWriting &&
      (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    return Write(id, c, now);
  }
  if (c.state == State::kReading || c.state == State::kDraining) {
    return Read(id, c, now);
  }
}

void HttpServer::Loop::Read(uint64_t id, Conn& c, int64_t now) {
  char buf[kChunk];
  if (c.state == State::kDraining) {
    for (;;) {
      const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return Close(id);
      if (n < 0) return;
      c.drained += n;
      if (c.drained > kMaxDrainBytes) return Close(id);
    }
  }
  // Input beyond the head limit is never read: the parser refuses it first.
  while (c.in.size() <= o_.max_header_bytes) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n == 0) return Close(id);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return Close(id);
    }
    if (!c.head_started) {
      c.head_started = true;
      c.deadline_ms = now + o_.header_timeout_ms;
    }
    c.active_ms = now;
    c.in.append(buf, n);
  }
  Parse(id, c, now);
}

void HttpServer::Loop::Parse(uint64_t id, Conn& c, int64_t now) {
  if (c.in.empty()) return;
  http::HeadResult r = http::ParseRequestHead(c.in, limits_);
  if (r.kind == http::HeadResult::kIncomplete) return;
  {
    MutexLock lock(mu_);
    ++stats_.requests;
  }
  if (r.kind == http::HeadResult::kError) {
    limited_.Log(spdlog::level::info, c.peer, "refused", "http: {} from {}: {}",
                 r.status, c.peer, r.error);
    c.in.clear();
    c.drain = true;
    return Refuse(id, c, http::TextReply(r.status, r.error + "\n"), false,
                  false, now);
  }
  c.in.erase(0, r.consumed);
  c.head_started = !c.in.empty();
  Route(id, c, std::move(r.head), now);
}

void HttpServer::Loop::Route(uint64_t id, Conn& c, http::RequestHead head,
                             int64_t now) {
  const bool head_only = head.method == "HEAD";
  const bool keep_alive = head.KeepAlive() &&
                          c.served + 1 < o_.max_requests_per_connection &&
                          now - c.opened_ms < o_.max_connection_ms;
  if (head.method != "GET" && !head_only) {
    return Refuse(id, c,
                  http::TextReply(405,
                                  "method " + head.method.substr(0, 32) +
                                      " is not allowed (GET, HEAD)\n",
                                  {{"Allow", "GET, HEAD"}}),
                  keep_alive, false, now);
  }
  if (head.query_bytes > o_.max_query_bytes) {
    return Refuse(id, c,
                  http::TextReply(
                      414, absl::StrCat("query of ", head.query_bytes,
                                        " bytes exceeds the limit of ",
                                        o_.max_query_bytes, "\n")),
                  keep_alive, head_only, now);
  }
  if (!o_.token.empty() && !SameToken(TokenOf(head), o_.token)) {
    return Refuse(id, c,
                  http::TextReply(
                      401, "a token is required (Authorization: Bearer T)\n",
                      {{"WWW-Authenticate", "Bearer"}}),
                  keep_alive, head_only, now);
  }
  auto route = routes_.find(head.path);
  if (route == routes_.end()) {
    return Refuse(id, c,
                  http::TextReply(
                      404, absl::StrCat("no page ", head.path.substr(0, 200),
                                        "; pages:", known_, "\n")),
                  keep_alive, head_only, now);
  }
  const bool gzip = head.Field("accept-encoding")
                        .value_or("")
                        .find("gzip") != std::string::npos;
  c.state = State::kHandling;
  c.keep_alive = keep_alive;
  Watch(id, c, 0);
  {
    MutexLock lock(mu_);
    jobs_.push_back({id, std::move(head), &route->second,
                     {.head_only = head_only, .keep_alive = keep_alive,
                      .gzip = gzip}});
  }
  work_cv_.notify_one();
}

void HttpServer::Loop::Refuse(uint64_t id, Conn& c, http::Reply reply,
                              bool keep_alive, bool head_only, int64_t now) {
  {
    MutexLock lock(mu_);
    ++stats_.refused;
  }
  StartWrite(id, c,
             http::Serialize(std::move(reply), {.head_only = head_only,
                                                .keep_alive = keep_alive}),
             keep_alive, now);
}

void HttpServer::Loop::Work() {
  for (;;) {
    Job job;
    {
      UniqueLock lock(mu_);
      std::deque<Job>::iterator next;
      work_cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        next = Runnable();
        return stopping_ || next != jobs_.end();
      });
      if (stopping_) return;
      job = std::move(*next);
      jobs_.erase(next);
      ++running_[job.handler];
    }
    HttpRequest request{job.head.path, std::move(job.head.params)};
    http::Reply reply;
    try {
      HttpResponse out = (*job.handler)(request);
      reply.status = out.status;
      reply.content_type = std::move(out.content_type);
      reply.body = std::move(out.body);
    } catch (const std::exception& e) {  // a handler's bug is its reply
      reply = http::TextReply(500, absl::StrCat("error: ", e.what(), "\n"));
    } catch (...) {
      reply = http::TextReply(500, "error: unknown exception\n");
    }
    Done done{job.id, http::Serialize(std::move(reply), job.reply),
              job.reply.keep_alive};
    {
      MutexLock lock(mu_);
      done_.push_back(std::move(done));
      if (--running_[job.handler] == 0) running_.erase(job.handler);
    }
    work_cv_.notify_all();  // a job held back by its route may run now
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
}

std::deque<HttpServer::Loop::Job>::iterator HttpServer::Loop::Runnable() {
  // No route may hold every handler thread: with one that blocks (the
  // trace download waits up to seconds for the event loop) the others still
  // get a thread. Oldest first otherwise.
  const int cap = std::max(1, workers_cap_ - 1);
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    auto r = running_.find(it->handler);
    if (r == running_.end() || r->second < cap) return it;
  }
  return jobs_.end();
}

void HttpServer::Loop::TakeDone(int64_t now) {
  std::vector<Done> done;
  {
    MutexLock lock(mu_);
    done.swap(done_);
  }
  for (Done& d : done) {
    auto it = conns_.find(d.id);
    if (it == conns_.end()) continue;  // closed while its handler ran
    StartWrite(d.id, it->second, std::move(d.bytes), d.keep_alive, now);
  }
}

void HttpServer::Loop::StartWrite(uint64_t id, Conn& c, std::string bytes,
                                  bool keep_alive, int64_t now) {
  c.state = State::kWriting;
  c.out = std::move(bytes);
  c.out_off = 0;
  c.keep_alive = keep_alive;
  c.deadline_ms = now + o_.write_timeout_ms;
  Write(id, c, now);
}

void HttpServer::Loop::Write(uint64_t id, Conn& c, int64_t now) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.out_off,
                           c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Watch(id, c, EPOLLOUT);
      }
      return Close(id);
    }
    c.out_off += n;
    c.active_ms = now;
  }
  std::string().swap(c.out);
  ++c.served;
  if (c.drain) {
    // An error reply: the client may still be sending (80 MB of headers);
    // closing with unread input would reset the connection and lose the
    // reply, so half-close and discard a bounded amount first.
    shutdown(c.fd, SHUT_WR);
    c.state = State::kDraining;
    c.deadline_ms = now + kDrainMs;
    return Watch(id, c, EPOLLIN);
  }
  if (!c.keep_alive) return Close(id);
  c.state = State::kReading;
  c.deadline_ms = c.head_started ? now + o_.header_timeout_ms
                                 : now + o_.idle_timeout_ms;
  Watch(id, c, EPOLLIN);
  Parse(id, c, now);  // a pipelined request may already be here
}

void HttpServer::Loop::Expire(int64_t now) {
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : conns_) {
    if (c.state != State::kHandling && now >= c.deadline_ms)
      expired.push_back(id);
  }
  for (uint64_t id : expired) {
    Conn& c = conns_[id];
    if (c.state == State::kDraining) {
      Close(id);
      continue;
    }
    if (c.state == State::kReading && c.head_started) {
      // A slow head (slow-loris): tell it why, best effort, then cut.
      const std::string reply = http::Serialize(
          http::TextReply(408, absl::StrCat("request head not complete within ",
                                            o_.header_timeout_ms, " ms\n")),
          {.keep_alive = false});
      (void)!send(c.fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      limited_.Log(spdlog::level::info, c.peer, "slow head",
                   "http: cut a connection from {}: request head not "
                   "complete within {} ms",
                   c.peer, o_.header_timeout_ms);
    } else if (c.state == State::kWriting) {
      limited_.Log(spdlog::level::info, c.peer, "slow reader",
                   "http: cut a connection from {}: reply not read within "
                   "{} ms",
                   c.peer, o_.write_timeout_ms);
    }
    const bool idle = c.state == State::kReading && !c.head_started;
    Close(id);
    if (!idle) {
      MutexLock lock(mu_);
      ++stats_.timed_out;
    }
  }
}

bool IsLoopbackHost(const std::string& host) {
  // Decided on the addresses the name resolves to, never on its spelling:
  // "127.attacker.test" is a DNS name like any other (docs/security.md).
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  if (h.empty()) return false;  // the wildcard address
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(h.c_str(), nullptr, &hints, &found) != 0) return false;
  bool all_loopback = found != nullptr;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      all_loopback = all_loopback && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      all_loopback = all_loopback && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      all_loopback = false;
    }
  }
  freeaddrinfo(found);
  return all_loopback;
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& o, std::map<std::string, HttpHandler> routes) {
  const size_t colon = o.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(o.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", o.listen, "' is not HOST:PORT"));
  }
  std::string host = o.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (!IsLoopbackHost(host) && o.token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listening on ", o.listen,
        " (not loopback) requires a token: anyone who reaches it could read "
        "every job's state"));
  }
  if (o.max_connections < 1 || o.max_requests_per_connection < 1 ||
      o.header_timeout_ms < 1 || o.idle_timeout_ms < 1 ||
      o.write_timeout_ms < 1 || o.max_connection_ms < 1) {
    return absl::InvalidArgumentError(
        "http listener limits (connections, requests, timeouts) must be "
        "positive");
  }
  int bound = 0;
  const int fd = Listen(host, port, &bound);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o.listen,
                     " (address in use or not on this host)"));
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->host_ = host;
  s->port_ = bound;
  s->loop_ = std::make_unique<Loop>(o, std::move(routes), fd);
  GetLogger("OBSERVE")->info("serving http on {}", s->url());
  return s;
}

HttpServer::~HttpServer() = default;

HttpServerStats HttpServer::stats() const { return loop_->stats(); }

std::string HttpServer::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return absl::StrCat("http://", v6 ? "[" : "", host_, v6 ? "]" : "", ":",
                      port_);
}

}  // namespace strata::observe

#include "observe/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <httplib.h>

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace strata::observe {
namespace {

// Compares without an early exit, so response time does not tell how much
// of a guessed token was right.
bool SameToken(const std::string& a, const std::string& b) {
  unsigned diff = a.size() ^ b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % (b.size() + 1)];
  return diff == 0;
}

std::string TokenOf(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) == 0) return auth.substr(7);
  return req.has_param("token") ? req.get_param_value("token") : "";
}

void Reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body + "\n", "text/plain; charset=utf-8");
}

}  // namespace

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
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->host_ = host;
  httplib::Server& srv = *s->server_;
  const int threads = std::max(1, o.threads);
  srv.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  srv.set_payload_max_length(0);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which
  // a second coordinator would silently share (and split) the port.
  srv.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  srv.set_read_timeout(5, 0);
  srv.set_write_timeout(5, 0);
  srv.set_keep_alive_max_count(100);
  // cpp-httplib compresses text and JSON replies with the first encoding the
  // client accepts, brotli before gzip, and its brotli encoder runs at the
  // library's default quality, 11, the slowest (Debian's 0.11.4 is built
  // with both). A client accepting br (curl --compressed, cpp-httplib's own
  // client) then costs the server a slow brotli pass of every reply: 261 ms
  // for a 314 KB exposition of 4,096 workers here, against 1.9 ms for zlib
  // at its default level 6. Only gzip is offered: Prometheus asks for it.
  // The Request is cpp-httplib's own non-const object; its handlers see it
  // const.
  srv.set_pre_routing_handler([](const httplib::Request& req,
                                 httplib::Response&) {
    auto& headers = const_cast<httplib::Request&>(req).headers;
    auto it = headers.find("Accept-Encoding");
    if (it != headers.end()) {
      const bool gzip = it->second.find("gzip") != std::string::npos;
      headers.erase("Accept-Encoding");
      if (gzip) headers.emplace("Accept-Encoding", "gzip");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  std::string known;
  for (const auto& [path, h] : routes) absl::StrAppend(&known, " ", path);
  auto serve = [routes = std::move(routes), known, token = o.token,
                max_query = o.max_query_bytes](const httplib::Request& req,
                                               httplib::Response& res) {
    size_t query = 0;
    for (const auto& [k, v] : req.params) query += k.size() + v.size() + 2;
    if (query > max_query) {
      return Reply(res, 414,
                   absl::StrCat("query of ", query,
                                " bytes exceeds the limit of ", max_query));
    }
    if (!token.empty() && !SameToken(TokenOf(req), token)) {
      res.set_header("WWW-Authenticate", "Bearer");
      return Reply(res, 401, "a token is required (Authorization: Bearer T)");
    }
    auto it = routes.find(req.path);
    if (it == routes.end()) {
      return Reply(
          res, 404,
          absl::StrCat("no page ", req.path.substr(0, 200), "; pages:", known));
    }
    HttpRequest r{req.path, {}};
    for (const auto& [k, v] : req.params) r.params[k] = v;
    HttpResponse out = it->second(r);
    res.status = out.status;
    res.set_content(std::move(out.body), out.content_type);
  };
  srv.Get(".*", serve);
  auto refuse = [](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", "GET, HEAD");
    Reply(res, 405, "method " + req.method + " is not allowed (GET, HEAD)");
  };
  srv.Post(".*", refuse);
  srv.Put(".*", refuse);
  srv.Patch(".*", refuse);
  srv.Delete(".*", refuse);
  srv.Options(".*", refuse);

  if (port == 0) {
    port = srv.bind_to_any_port(host);
  } else if (!srv.bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o.listen,
                     " (address in use or not on this host)"));
  }
  s->port_ = port;
  s->thread_ = std::thread([&srv, done = &s->done_] {
    srv.listen_after_bind();
    *done = true;
  });
  // cpp-httplib's stop() does nothing before the listen loop runs (and the
  // loop then never ends): return only once it runs.
  for (int i = 0; i < 5000 && !srv.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!srv.is_running()) {
    return absl::UnavailableError(
        absl::StrCat("http listener on ", o.listen, " did not start in 5 s"));
  }
  GetLogger("OBSERVE")->info("serving http on {}", s->url());
  return s;
}

HttpServer::~HttpServer() {
  // stop() is lost if the listen loop has not started yet: repeat it.
  while (thread_.joinable() && !done_) {
    server_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (thread_.joinable()) thread_.join();
}

std::string HttpServer::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return absl::StrCat("http://", v6 ? "[" : "", host_, v6 ? "]" : "", ":",
                      port_);
}

}  // namespace strata::observe

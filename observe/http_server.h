// A small read-only HTTP server for `/metrics` and the dashboard
// (cpp-httplib underneath).
//
// Contract:
// - Only GET and HEAD are served; other methods get 405 with `Allow`.
//   Unknown paths get 404 naming the known ones; a query string longer than
//   `max_query_bytes` gets 414; request lines and headers beyond cpp-httplib's
//   8 KiB limits get 414/400; request bodies are refused (413). Nothing a
//   client sends can crash the owner: handlers see only a path and the
//   decoded query parameters.
// - Listening on a non-loopback address requires a token; with a token every
//   request must carry it (`Authorization: Bearer T` or `?token=T`), else 401.
// - Replies are gzip-compressed when the client accepts gzip, and sent as
//   they are otherwise: never brotli (see the .cc for why).
// - Handlers run on the server's own threads (`threads`, default 2): they
//   must be thread-safe with respect to the owner's state — the coordinator
//   hands them snapshots it published, never its live state.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace httplib {
class Server;
}

namespace strata::observe {

struct HttpRequest {
  std::string path;
  std::map<std::string, std::string> params;  // decoded query parameters
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 picks a free one
  std::string token;                   // required off loopback
  int threads = 2;
  size_t max_query_bytes = 4096;
};

class HttpServer {
 public:
  // Binds and starts serving `routes` (exact paths, e.g. "/metrics").
  // InvalidArgument for a malformed listen address or a non-loopback one
  // without a token; Unavailable naming the address when it cannot bind.
  static StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& options,
      std::map<std::string, HttpHandler> routes);
  ~HttpServer();  // stops listening and joins the server's threads

  int port() const { return port_; }
  // "http://HOST:PORT".
  std::string url() const;

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> done_{false};  // the listen loop returned
  std::string host_;
  int port_ = 0;
};

// True when every address `host` resolves to (getaddrinfo; a literal is
// itself) is in 127.0.0.0/8 or ::1. False for names that do not resolve and
// for the wildcard (empty host).
bool IsLoopbackHost(const std::string& host);

}  // namespace strata::observe

// A small read-only HTTP/1.1 server for `/metrics`, the dashboard and
// traces.
//
// Contract:
// - Only GET and HEAD are served; other methods get 405 with `Allow`.
//   Unknown paths get 404 naming the known ones; a query string longer than
//   `max_query_bytes` (decoded) gets 414, a request line longer than
//   `max_request_line_bytes` 414, a head (request line and fields) longer
//   than `max_header_bytes` 431, a request with a body 413. Nothing a
//   client sends can crash the owner: handlers see only a path and the
//   decoded query parameters.
// - Listening on a non-loopback address requires a token; with a token every
//   request must carry it (`Authorization: Bearer T` or `?token=T`), else 401.
//   The token is checked before a handler thread is involved.
// - Replies are gzip-compressed when the client accepts gzip (never brotli).
// - Bounded per connection and in total, so that no number of slow,
//   idle or keep-alive clients can keep a request from being answered:
//   one I/O thread (epoll) reads every connection without blocking and
//   holds at most `max_header_bytes` + 4 KiB of unparsed input for each; a
//   request head must arrive within `header_timeout_ms` of its first byte
//   (slow-loris clients are cut), an idle keep-alive connection is closed
//   after `idle_timeout_ms`, a connection serves at most
//   `max_requests_per_connection` requests and is closed after
//   `max_connection_ms`; a reply must be written within
//   `write_timeout_ms`. Beyond `max_connections` the least recently active
//   connection that is not waiting on a handler is closed for the new one.
// - Handlers run on `threads` handler threads (default 2) that only ever
//   see complete, authorised requests; at most one request per connection
//   is queued or running, and no route holds more than threads - 1 of them
//   at once (at least 1), so a route whose handler blocks cannot starve the
//   others. Handlers must be thread-safe with respect to the owner's state
//   (the coordinator hands them snapshots it published).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"

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
  int threads = 2;                       // handler threads
  size_t max_query_bytes = 4096;         // decoded; 414 beyond
  size_t max_request_line_bytes = 8192;  // 414 beyond
  size_t max_header_bytes = 16384;       // request line + fields; 431 beyond
  int header_timeout_ms = 5000;   // a head's first byte to its blank line
  int idle_timeout_ms = 5000;     // keep-alive wait for the next request
  int write_timeout_ms = 10000;   // to write one whole reply
  int max_requests_per_connection = 100;
  int max_connection_ms = 60000;  // then the next reply closes it
  int max_connections = 512;      // open at once; the oldest idle yields
};

// Counters since Start(), for tests and logs.
struct HttpServerStats {
  uint64_t accepted = 0;
  uint64_t requests = 0;        // complete heads read
  uint64_t refused = 0;         // 4xx/5xx replied without a handler
  uint64_t timed_out = 0;       // cut by the head, idle or write deadline
  uint64_t evicted = 0;         // closed to make room (max_connections)
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
  HttpServerStats stats() const;
  // "http://HOST:PORT".
  std::string url() const;

 private:
  class Loop;  // observe/http_server.cc
  HttpServer() = default;
  std::unique_ptr<Loop> loop_;
  std::string host_;
  int port_ = 0;
};

// True when every address `host` resolves to (getaddrinfo; a literal is
// itself) is in 127.0.0.0/8 or ::1. False for names that do not resolve and
// for the wildcard (empty host).
bool IsLoopbackHost(const std::string& host);

}  // namespace strata::observe

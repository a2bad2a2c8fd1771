// Parsing of one HTTP/1.x request head (request line and header fields,
// RFC 9112 sections 3 and 5) out of the bytes a connection has read so far,
// within size limits. Pure: no I/O, no clock; the listener
// (observe/http_server.cc) owns the socket, the deadlines and the replies.
//
// Contract:
// - ParseRequestHead() looks at a prefix of `bytes`; it never keeps them.
//   While the head is incomplete it returns kIncomplete, or kError 431 once
//   `bytes` already holds more than `max_head_bytes` (414 when the request
//   line alone is longer than `max_request_line_bytes`), so a caller that
//   buffers at most max_head_bytes + one read holds a bounded amount.
// - kComplete gives the parsed request and how many bytes the head used;
//   bytes after it belong to the next request (pipelining).
// - kError gives the status to reply with (400, 413, 414, 431, 505) and a
//   message naming what is wrong; the caller replies and closes.
// - Requests with a body (Content-Length > 0 or any Transfer-Encoding) are
//   refused with 413: the listener serves only GET and HEAD.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::observe::http {

struct HeadLimits {
  size_t max_request_line_bytes = 8192;  // 414 beyond
  size_t max_head_bytes = 16384;         // request line + fields; 431 beyond
  size_t max_fields = 100;               // 431 beyond
};

struct RequestHead {
  std::string method;  // as sent, e.g. "GET"
  std::string path;    // percent-decoded, without the query
  std::map<std::string, std::string> params;  // decoded query parameters
  size_t query_bytes = 0;  // sum over params of key + value + 2
  bool http10 = false;     // HTTP/1.0 (else 1.1)
  // Field names lower-cased, values trimmed, in arrival order.
  std::vector<std::pair<std::string, std::string>> fields;

  // The first field named `lower_name` (lower case), if any.
  std::optional<std::string> Field(std::string_view lower_name) const;
  // Whether the connection may serve another request after this one
  // (HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with keep-alive).
  bool KeepAlive() const;
};

struct HeadResult {
  enum Kind { kIncomplete, kComplete, kError };
  Kind kind = kIncomplete;
  size_t consumed = 0;  // kComplete: bytes of the head, blank line included
  RequestHead head;     // kComplete
  int status = 0;       // kError
  std::string error;    // kError
};

HeadResult ParseRequestHead(std::string_view bytes, const HeadLimits& limits);

// "%41+b" -> "A b" (application/x-www-form-urlencoded when `plus_is_space`).
// Malformed escapes are kept as they are.
std::string PercentDecode(std::string_view s, bool plus_is_space);

}  // namespace strata::observe::http

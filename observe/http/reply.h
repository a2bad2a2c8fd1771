// Serialising one HTTP/1.1 reply (status line, fields, body), optionally
// gzip-compressed. Pure; the listener writes the bytes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace strata::observe::http {

struct Reply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> fields;  // extra fields
};

// A plain-text reply.
inline Reply TextReply(
    int status, std::string body,
    std::vector<std::pair<std::string, std::string>> fields = {}) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  r.fields = std::move(fields);
  return r;
}

struct ReplyOptions {
  bool head_only = false;   // HEAD: fields as for GET, no body
  bool keep_alive = true;   // "Connection: keep-alive", else "close"
  bool gzip = false;        // the client accepts gzip
};

// The bytes to send. With `gzip` a text or JSON body is sent gzip-encoded
// (zlib's default level 6) with "Content-Encoding: gzip".
std::string Serialize(Reply reply, const ReplyOptions& options);

// "Not Found" for 404; "Unknown" for codes this server never sends.
const char* ReasonPhrase(int status);

}  // namespace strata::observe::http

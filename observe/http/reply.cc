#include "observe/http/reply.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"

namespace strata::observe::http {
namespace {

bool Compressible(const std::string& type) {
  return type.rfind("text/", 0) == 0 ||
         type.find("json") != std::string::npos ||
         type.find("javascript") != std::string::npos ||
         type.find("xml") != std::string::npos;
}

// gzip framing (windowBits 15 + 16, zlib manual, deflateInit2) at
// Z_DEFAULT_COMPRESSION (level 6). False if zlib fails.
bool Gzip(const std::string& in, std::string* out) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  out->resize(deflateBound(&z, in.size()) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  const int rc = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

}  // namespace

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string Serialize(Reply r, const ReplyOptions& o) {
  std::string encoding;
  if (o.gzip && !r.body.empty() && Compressible(r.content_type)) {
    std::string zipped;
    if (Gzip(r.body, &zipped)) {
      r.body = std::move(zipped);
      encoding = "gzip";
    }
  }
  std::string out = absl::StrCat("HTTP/1.1 ", r.status, " ",
                                 ReasonPhrase(r.status), "\r\nContent-Type: ",
                                 r.content_type, "\r\nContent-Length: ",
                                 r.body.size(), "\r\nConnection: ",
                                 o.keep_alive ? "keep-alive" : "close", "\r\n");
  if (!encoding.empty()) {
    absl::StrAppend(&out, "Content-Encoding: ", encoding,
                    "\r\nVary: Accept-Encoding\r\n");
  }
  for (const auto& [k, v] : r.fields) absl::StrAppend(&out, k, ": ", v, "\r\n");
  out += "\r\n";
  if (!o.head_only) out += r.body;
  return out;
}

}  // namespace strata::observe::http

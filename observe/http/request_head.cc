#include "observe/http/request_head.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::observe::http {
namespace {

HeadResult Error(int status, std::string message) {
  HeadResult r;
  r.kind = HeadResult::kError;
  r.status = status;
  r.error = std::move(message);
  return r;
}

// RFC 9110 section 5.6.2: field names and methods are tokens.
bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c <= 32 || c >= 127) return false;
    if (std::string_view("\"(),/:;<=>?@[\\]{}").find(c) !=
        std::string_view::npos)
      return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void ParseQuery(std::string_view query, RequestHead& head) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view()
                                          : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string key = PercentDecode(pair.substr(0, eq), true);
    std::string value = eq == std::string_view::npos
                            ? std::string()
                            : PercentDecode(pair.substr(eq + 1), true);
    head.query_bytes += key.size() + value.size() + 2;
    head.params.emplace(std::move(key), std::move(value));
  }
}

// "GET /p?q HTTP/1.1" into `head`; an error reply otherwise.
std::optional<HeadResult> ParseRequestLine(std::string_view line,
                                           RequestHead& head) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) {
    return Error(400, "malformed request line (want METHOD TARGET VERSION)");
  }
  head.method = std::string(line.substr(0, sp1));
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(head.method)) return Error(400, "malformed request method");
  if (version == "HTTP/1.0") {
    head.http10 = true;
  } else if (version != "HTTP/1.1") {
    return Error(505, absl::StrCat("HTTP version '", std::string(version.substr(0, 16)),
                                   "' is not supported (1.0, 1.1)"));
  }
  if (target.empty() || target.front() != '/') {
    return Error(400, "request target must be an absolute path");
  }
  const size_t q = target.find('?');
  head.path = PercentDecode(target.substr(0, q), false);
  if (q != std::string_view::npos) ParseQuery(target.substr(q + 1), head);
  return std::nullopt;
}

}  // namespace

std::string PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> RequestHead::Field(std::string_view name) const {
  for (const auto& [k, v] : fields) {
    if (k == name) return v;
  }
  return std::nullopt;
}

bool RequestHead::KeepAlive() const {
  const std::string c = absl::AsciiStrToLower(Field("connection").value_or(""));
  if (c.find("close") != std::string::npos) return false;
  return !http10 || c.find("keep-alive") != std::string::npos;
}

HeadResult ParseRequestHead(std::string_view bytes, const HeadLimits& limits) {
  // The request line: 414 once it is too long, complete or not.
  const size_t line_end = bytes.find("\r\n");
  const size_t line_len =
      line_end == std::string_view::npos ? bytes.size() : line_end;
  if (line_len > limits.max_request_line_bytes) {
    return Error(414, absl::StrCat("request line exceeds the limit of ",
                                   limits.max_request_line_bytes, " bytes"));
  }
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() > limits.max_head_bytes) {
      return Error(431, absl::StrCat("request header fields exceed the limit "
                                     "of ",
                                     limits.max_head_bytes, " bytes"));
    }
    return HeadResult{};
  }
  if (end + 4 > limits.max_head_bytes) {
    return Error(431, absl::StrCat("request header fields exceed the limit of ",
                                   limits.max_head_bytes, " bytes"));
  }
  HeadResult r;
  r.kind = HeadResult::kComplete;
  r.consumed = end + 4;
  if (auto bad = ParseRequestLine(bytes.substr(0, line_end), r.head)) {
    return *std::move(bad);
  }
  std::string_view rest = bytes.substr(line_end + 2, end - line_end - 2);
  if (line_end == end) rest = {};
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view()
                                         : rest.substr(eol + 2);
    if (r.head.fields.size() >= limits.max_fields) {
      return Error(431, absl::StrCat("more than ", limits.max_fields,
                                     " request header fields"));
    }
    const size_t colon = line.find(':');
    // Obsolete line folding (a leading space) is refused (RFC 9112 5.2).
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Error(400, "malformed request header field");
    }
    r.head.fields.emplace_back(
        absl::AsciiStrToLower(std::string(line.substr(0, colon))),
        std::string(absl::StripAsciiWhitespace(
            std::string(line.substr(colon + 1)))));
  }
  if (r.head.Field("transfer-encoding")) {
    return Error(413, "request bodies are not accepted (GET and HEAD only)");
  }
  if (auto length = r.head.Field("content-length")) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(*length, &n)) {
      return Error(400, "malformed Content-Length");
    }
    if (n > 0) {
      return Error(413, "request bodies are not accepted (GET and HEAD only)");
    }
  }
  return r;
}

}  // namespace strata::observe::http

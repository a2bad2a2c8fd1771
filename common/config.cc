#include "common/config.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/yaml.h"

namespace strata {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// The echo of a user's value in an error message, at most 64 bytes.
std::string Echo(std::string_view text) {
  if (text.size() <= 64) return std::string(text);
  return absl::StrCat(std::string(text.substr(0, 64)), "... (", text.size(),
                      " bytes)");
}

// Line (from 1) of byte `offset` of `text`.
size_t LineOf(std::string_view text, size_t offset) {
  size_t line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    line += text[i] == '\n';
  return line;
}

// Byte offset of the first NUL byte or invalid UTF-8 sequence (truncated,
// overlong, a surrogate, past U+10FFFF), or npos.
size_t FirstBadUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    if (c == 0) return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (s.size() - i <= n) return i;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
        (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += n + 1;
  }
  return std::string_view::npos;
}

// Nesting depth of a YAML/JSON text, checked before yaml-cpp (a recursive
// parser) sees it: open flow brackets plus the block levels that
// indentation and "- " item markers open. Quoted scalars, comments and
// block scalars (| and >) do not count. Returns the first line deeper than
// kMaxConfigDepth, or 0. A heuristic that may overcount only on texts
// with dozens of distinct indentation steps, which no config needs.
size_t FirstTooDeepLine(std::string_view text) {
  std::vector<size_t> indents;  // open block levels
  int flow = 0;
  char quote = 0;
  size_t line = 0;
  size_t block_scalar_indent = std::string_view::npos;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view l = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line;
    size_t i = 0;
    while (i < l.size() && l[i] == ' ') ++i;
    const bool blank = i == l.size() || l[i] == '#' || l[i] == '\r';
    if (block_scalar_indent != std::string_view::npos) {
      if (blank || i > block_scalar_indent) continue;
      block_scalar_indent = std::string_view::npos;
    }
    if (blank && quote == 0) continue;
    if (quote == 0 && flow == 0) {
      while (!indents.empty() && indents.back() >= i) indents.pop_back();
      indents.push_back(i);
      // "- - key": each item marker opens one more level.
      while (i + 1 < l.size() && l[i] == '-' && l[i + 1] == ' ') {
        indents.push_back(i + 1);
        i += 2;
        while (i < l.size() && l[i] == ' ') ++i;
      }
    }
    char last = 0;
    for (; i < l.size(); ++i) {
      const char c = l[i];
      if (quote != 0) {
        if (c == '\\' && quote == '"') {
          ++i;
        } else if (c == quote) {
          quote = 0;
        }
        continue;
      }
      if (c == '#' && (i == 0 || l[i - 1] == ' ' || l[i - 1] == '\t')) break;
      if (c == '"' || c == '\'') {
        // A quote opens a scalar only where a scalar starts.
        if (i == 0 || std::strchr(" \t[{,:-", l[i - 1]) != nullptr) quote = c;
      } else if (c == '[' || c == '{') {
        ++flow;
      } else if (c == ']' || c == '}') {
        flow = std::max(0, flow - 1);
      }
      if (c != ' ' && c != '\t' && c != '\r') last = c;
      if (static_cast<int>(indents.size()) + flow > kMaxConfigDepth) {
        return line;
      }
    }
    if (static_cast<int>(indents.size()) + flow > kMaxConfigDepth) return line;
    if (quote == 0 && flow == 0 && (last == '|' || last == '>')) {
      block_scalar_indent = indents.empty() ? 0 : indents.back();
    }
  }
  return 0;
}

// Converts one YAML document into JSON following a message descriptor,
// checking the numbers against `ranges` as it goes (so errors carry the
// line) and counting nodes so aliases cannot expand without bound.
class YamlToJson {
 public:
  YamlToJson(const std::string& source, absl::Span<const FieldRange> ranges,
             size_t max_json_bytes)
      : source_(source), ranges_(ranges), max_json_bytes_(max_json_bytes) {}

  Status Message(const YAML::Node& node, const Descriptor* desc,
                 const std::string& path, std::string* out) {
    RETURN_IF_ERROR(Visit(node, path));
    if (node.IsNull()) {
      out->append("{}");
      return absl::OkStatus();
    }
    if (!node.IsMap()) {
      return Error(node, path,
                   absl::StrCat("expected a mapping for ", desc->name()));
    }
    out->push_back('{');
    bool first = true;
    std::map<std::string, int> seen;  // field name -> line
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        return Error(kv.first, path, "a key must be a plain name");
      }
      const std::string& key = kv.first.Scalar();
      const FieldDescriptor* field = desc->FindFieldByName(key);
      if (field == nullptr) field = desc->FindFieldByCamelcaseName(key);
      std::string field_path = path.empty() ? key : path + "." + key;
      if (field == nullptr) {
        std::vector<std::string> known;
        for (int i = 0; i < desc->field_count(); ++i) {
          known.push_back(desc->field(i)->name());
        }
        return Error(
            kv.first, Echo(field_path),
            absl::StrCat("unknown field in ", desc->name(),
                         " (known fields: ", absl::StrJoin(known, ", "), ")"));
      }
      auto [it, inserted] =
          seen.emplace(field->name(), kv.first.Mark().line + 1);
      if (!inserted) {
        return Error(kv.first, field_path,
                     absl::StrCat("duplicate key (first given at line ",
                                  it->second, ")"));
      }
      if (kv.second.IsNull()) continue;  // `key:` with no value = unset
      if (!first) out->push_back(',');
      first = false;
      AppendJsonString(field->name(), out);
      out->push_back(':');
      RETURN_IF_ERROR(Field(kv.second, field, field_path, out));
    }
    out->push_back('}');
    return absl::OkStatus();
  }

 private:
  // Counts a node against the budget and the JSON size limit.
  Status Visit(const YAML::Node& node, const std::string& path) {
    if (++nodes_ > kMaxConfigNodes) {
      return Error(node, path,
                   absl::StrCat("more than ", kMaxConfigNodes,
                                " values (aliases expand to copies)"));
    }
    return absl::OkStatus();
  }

  // Checks the number of entries of a repeated or map field.
  Status CheckCount(const YAML::Node& node, const std::string& path) {
    const FieldRange* r = FindRange(ranges_, path);
    if (r == nullptr) return absl::OkStatus();
    Status st = CheckValue(static_cast<double>(node.size()), *r,
                           "the number of entries");
    return st.ok() ? st : Error(node, path, std::string(st.message()));
  }

  Status Field(const YAML::Node& node, const FieldDescriptor* field,
               const std::string& path, std::string* out) {
    if (field->is_map()) {
      if (!node.IsMap()) return Error(node, path, "expected a mapping");
      RETURN_IF_ERROR(CheckCount(node, path));
      const FieldDescriptor* value_field =
          field->message_type()->FindFieldByName("value");
      out->push_back('{');
      bool first = true;
      std::map<std::string, int> seen;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return Error(kv.first, path, "a key must be a plain string");
        }
        const std::string& key = kv.first.Scalar();
        const std::string key_path = path + "." + Echo(key);
        auto [it, inserted] = seen.emplace(key, kv.first.Mark().line + 1);
        if (!inserted) {
          return Error(kv.first, key_path,
                       absl::StrCat("duplicate key (first given at line ",
                                    it->second, ")"));
        }
        if (!first) out->push_back(',');
        first = false;
        AppendJsonString(key, out);
        out->push_back(':');
        RETURN_IF_ERROR(Single(kv.second, value_field, key_path, out));
      }
      out->push_back('}');
      return absl::OkStatus();
    }
    if (field->is_repeated()) {
      if (!node.IsSequence()) return Error(node, path, "expected a list");
      RETURN_IF_ERROR(CheckCount(node, path));
      out->push_back('[');
      for (std::size_t i = 0; i < node.size(); ++i) {
        if (i > 0) out->push_back(',');
        RETURN_IF_ERROR(
            Single(node[i], field, absl::StrCat(path, "[", i, "]"), out));
      }
      out->push_back(']');
      return absl::OkStatus();
    }
    return Single(node, field, path, out);
  }

  // Checks a number against the range table entry of `path`, if any.
  Status InRange(const YAML::Node& node, const std::string& path,
                 double value) {
    const FieldRange* r = FindRange(ranges_, path);
    if (r == nullptr) return absl::OkStatus();
    Status st = CheckValue(value, *r, "value");
    if (st.ok()) return st;
    return Error(node, path, std::string(st.message()));
  }

  Status Single(const YAML::Node& node, const FieldDescriptor* field,
                const std::string& path, std::string* out) {
    if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      return Message(node, field->message_type(), path, out);
    }
    RETURN_IF_ERROR(Visit(node, path));
    if (!node.IsScalar()) return Error(node, path, "expected a scalar value");
    const std::string& text = node.Scalar();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64: {
        long long v = 0;
        auto [ptr, ec] =
            std::from_chars(text.data(), text.data() + text.size(), v);
        const bool whole = ptr == text.data() + text.size();
        if (ec == std::errc::result_out_of_range && whole) {
          const FieldRange* r = FindRange(ranges_, path);
          return Error(node, path,
                       absl::StrCat("value = ", Echo(text), " is out of range ",
                                    r ? RangeText(*r) : "of a 64-bit integer"));
        }
        if (ec != std::errc() || !whole) {
          return Error(
              node, path,
              absl::StrCat("expected an integer, got '", Echo(text), "'"));
        }
        RETURN_IF_ERROR(InRange(node, path, static_cast<double>(v)));
        bool is32 = field->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
                    field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32;
        bool is_unsigned =
            field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32 ||
            field->cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
        if ((is32 && (v > std::numeric_limits<int32_t>::max() ||
                      v < std::numeric_limits<int32_t>::min())) ||
            (is_unsigned && v < 0)) {
          return Error(node, path,
                       absl::StrCat("integer ", text, " is out of range"));
        }
        out->append(std::to_string(v));
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        char* end = nullptr;
        errno = 0;
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || errno != 0 ||
            !std::isfinite(v)) {
          return Error(
              node, path,
              absl::StrCat("expected a number, got '", Echo(text), "'"));
        }
        RETURN_IF_ERROR(InRange(node, path, v));
        std::ostringstream os;
        os.precision(17);
        os << v;
        out->append(os.str());
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        std::string lower = absl::AsciiStrToLower(text);
        if (lower == "true" || lower == "yes" || lower == "on") {
          out->append("true");
        } else if (lower == "false" || lower == "no" || lower == "off") {
          out->append("false");
        } else {
          return Error(
              node, path,
              absl::StrCat("expected true or false, got '", Echo(text), "'"));
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_ENUM: {
        const auto* e = field->enum_type();
        for (int i = 0; i < e->value_count(); ++i) {
          if (absl::EqualsIgnoreCase(e->value(i)->name(), text)) {
            AppendJsonString(e->value(i)->name(), out);
            return absl::OkStatus();
          }
        }
        std::vector<std::string> names;
        for (int i = 0; i < e->value_count(); ++i) {
          names.push_back(e->value(i)->name());
        }
        return Error(node, path,
                     absl::StrCat("'", Echo(text), "' is not one of: ",
                                  absl::StrJoin(names, ", ")));
      }
      case FieldDescriptor::CPPTYPE_STRING:
        AppendJsonString(text, out);
        if (out->size() > max_json_bytes_) {
          return Error(node, path,
                       absl::StrCat("the values expand to more than ",
                                    max_json_bytes_, " bytes"));
        }
        return absl::OkStatus();
      default:
        return Error(node, path, "unsupported field type");
    }
  }

  Status Error(const YAML::Node& node, const std::string& path,
               const std::string& what) const {
    const YAML::Mark mark = node.Mark();
    std::string where = source_;
    if (mark.line >= 0) {
      absl::StrAppend(&where, ":", mark.line + 1, ":", mark.column + 1);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": field '", path, "': ", what));
  }

  const std::string& source_;
  absl::Span<const FieldRange> ranges_;
  size_t max_json_bytes_;
  int64_t nodes_ = 0;
};

}  // namespace

Status ParseConfig(std::string_view text, const std::string& source,
                   google::protobuf::Message* msg,
                   absl::Span<const FieldRange> ranges, size_t max_bytes) {
  msg->Clear();
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", text.size(), " bytes; config files are limited to ",
        max_bytes, " bytes"));
  }
  if (size_t bad = FirstBadUtf8(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", LineOf(text, bad), ": not UTF-8 text (byte ", bad,
        " is 0x",
        absl::Hex(static_cast<unsigned char>(text[bad]), absl::kZeroPad2),
        ")"));
  }
  if (size_t line = FirstTooDeepLine(text); line > 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", line,
                                                   ": nesting deeper than ",
                                                   kMaxConfigDepth, " levels"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", e.mark.line + 1,
                                                   ": nesting deeper than ",
                                                   kMaxConfigDepth, " levels"));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ":", e.mark.column + 1,
                     ": malformed YAML/JSON: ", e.msg));
  }
  std::string json;
  try {
    RETURN_IF_ERROR(YamlToJson(source, ranges, 4 * max_bytes)
                        .Message(root, msg->GetDescriptor(), "", &json));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": malformed YAML/JSON: ", e.what()));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(json, msg, options);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", std::string(st.message())));
  }
  return absl::OkStatus();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "cannot open " + path);
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) return absl::UnavailableError("error reading " + path);
  return os.str();
}

Status LoadConfigFile(const std::string& path, google::protobuf::Message* msg,
                      absl::Span<const FieldRange> ranges, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, "cannot open " + path);
  // One byte past the limit is enough to tell that the file is too big.
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return absl::UnavailableError("error reading " + path);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": more than ", max_bytes, " bytes; config files are limited to ",
        max_bytes, " bytes"));
  }
  return ParseConfig(text, path, msg, ranges, max_bytes);
}

std::string MessageToJson(const google::protobuf::Message& msg, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = pretty;
  std::string out;
  // Printing a valid in-memory message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(msg, &out, options);
  return out;
}

}  // namespace strata

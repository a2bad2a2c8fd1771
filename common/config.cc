#include "common/config.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
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

// Converts one YAML document into JSON following a message descriptor.
class YamlToJson {
 public:
  explicit YamlToJson(const std::string& source) : source_(source) {}

  Status Message(const YAML::Node& node, const Descriptor* desc,
                 const std::string& path, std::string* out) {
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
    for (const auto& kv : node) {
      std::string key = kv.first.as<std::string>();
      const FieldDescriptor* field = desc->FindFieldByName(key);
      if (field == nullptr) field = desc->FindFieldByCamelcaseName(key);
      std::string field_path = path.empty() ? key : path + "." + key;
      if (field == nullptr) {
        std::vector<std::string> known;
        for (int i = 0; i < desc->field_count(); ++i) {
          known.push_back(desc->field(i)->name());
        }
        return Error(
            kv.first, field_path,
            absl::StrCat("unknown field in ", desc->name(),
                         " (known fields: ", absl::StrJoin(known, ", "), ")"));
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
  Status Field(const YAML::Node& node, const FieldDescriptor* field,
               const std::string& path, std::string* out) {
    if (field->is_map()) {
      if (!node.IsMap()) return Error(node, path, "expected a mapping");
      const FieldDescriptor* value_field =
          field->message_type()->FindFieldByName("value");
      out->push_back('{');
      bool first = true;
      for (const auto& kv : node) {
        if (!first) out->push_back(',');
        first = false;
        AppendJsonString(kv.first.as<std::string>(), out);
        out->push_back(':');
        RETURN_IF_ERROR(Single(kv.second, value_field,
                               path + "." + kv.first.as<std::string>(), out));
      }
      out->push_back('}');
      return absl::OkStatus();
    }
    if (field->is_repeated()) {
      if (!node.IsSequence()) return Error(node, path, "expected a list");
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

  Status Single(const YAML::Node& node, const FieldDescriptor* field,
                const std::string& path, std::string* out) {
    if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      return Message(node, field->message_type(), path, out);
    }
    if (!node.IsScalar()) return Error(node, path, "expected a scalar value");
    const std::string text = node.Scalar();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64: {
        long long v = 0;
        auto [ptr, ec] =
            std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || ptr != text.data() + text.size()) {
          return Error(node, path,
                       absl::StrCat("expected an integer, got '", text, "'"));
        }
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
          return Error(node, path,
                       absl::StrCat("expected a number, got '", text, "'"));
        }
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
              absl::StrCat("expected true or false, got '", text, "'"));
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
                     absl::StrCat("'", text, "' is not one of: ",
                                  absl::StrJoin(names, ", ")));
      }
      case FieldDescriptor::CPPTYPE_STRING:
        AppendJsonString(text, out);
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
};

}  // namespace

Status ParseConfig(std::string_view text, const std::string& source,
                   google::protobuf::Message* msg) {
  msg->Clear();
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ":", e.mark.column + 1,
                     ": malformed YAML/JSON: ", e.msg));
  }
  std::string json;
  try {
    RETURN_IF_ERROR(
        YamlToJson(source).Message(root, msg->GetDescriptor(), "", &json));
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

Status LoadConfigFile(const std::string& path, google::protobuf::Message* msg) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseConfig(text, path, msg);
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

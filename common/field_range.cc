#include "common/field_range.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"

namespace strata {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string Number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.2e18) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%g", v);
}

// The value of a singular numeric field as a double (int64 values beyond
// 2^53 round, which cannot move them into a range that excludes them).
double ValueOf(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return static_cast<double>(r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return static_cast<double>(r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return r->GetFloat(m, f);
    default:
      return 0;  // not numeric: tables list numeric fields only
  }
}

// Checks `range` at `parts[i..]` below `m`; `shown` is the path so far with
// the indices of repeated elements.
Status Walk(const Message& m, const std::vector<std::string>& parts, size_t i,
            const std::string& shown, const FieldRange& range,
            absl::string_view where) {
  const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(parts[i]);
  if (f == nullptr) {
    return absl::InternalError(
        absl::StrCat("range table names unknown field '", range.path, "'"));
  }
  const Reflection* r = m.GetReflection();
  const std::string name = shown.empty() ? parts[i] : shown + "." + parts[i];
  const bool last = i + 1 == parts.size();
  if (f->is_repeated()) {
    const int n = r->FieldSize(m, f);
    if (last) {
      return CheckValue(
          n, range,
          absl::StrCat(where, ": the number of entries in '", name, "'"));
    }
    for (int k = 0; k < n; ++k) {
      RETURN_IF_ERROR(Walk(r->GetRepeatedMessage(m, f, k), parts, i + 1,
                           absl::StrCat(name, "[", k, "]"), range, where));
    }
    return absl::OkStatus();
  }
  if (f->has_presence() && !r->HasField(m, f)) return absl::OkStatus();
  if (!last) {
    return Walk(r->GetMessage(m, f), parts, i + 1, name, range, where);
  }
  return CheckValue(ValueOf(m, f), range,
                    absl::StrCat(where, ": field '", name, "'"));
}

}  // namespace

const FieldRange* FindRange(absl::Span<const FieldRange> table,
                            absl::string_view path) {
  std::string plain;
  int depth = 0;
  for (char c : path) {
    if (c == '[') ++depth;
    if (depth == 0) plain.push_back(c);
    if (c == ']') --depth;
  }
  for (const FieldRange& r : table) {
    if (plain == r.path) return &r;
  }
  return nullptr;
}

std::string RangeText(const FieldRange& r) {
  return absl::StrCat(r.min_exclusive ? "(" : "[", Number(r.min), ", ",
                      Number(r.max), "]");
}

Status CheckValue(double value, const FieldRange& r, absl::string_view what) {
  const bool above_min = r.min_exclusive ? value > r.min : value >= r.min;
  if (above_min && value <= r.max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " = ", Number(value), " is out of range ", RangeText(r)));
}

Status CheckRanges(const Message& msg, absl::Span<const FieldRange> table,
                   absl::string_view where) {
  for (const FieldRange& range : table) {
    const std::vector<std::string> parts = absl::StrSplit(range.path, '.');
    RETURN_IF_ERROR(Walk(msg, parts, 0, "", range, where));
  }
  return absl::OkStatus();
}

std::string RangesMarkdown(absl::Span<const FieldRange> table) {
  std::string out = "| field | range | meaning |\n|---|---|---|\n";
  for (const FieldRange& r : table) {
    absl::StrAppend(&out, "| `", r.path, "` | ", RangeText(r), " | ", r.meaning,
                    " |\n");
  }
  return out;
}

}  // namespace strata

// Config loading: YAML or JSON files into protobuf messages.
//
// The pipeline is yaml-cpp -> JSON -> protobuf's JSON parser. The YAML walk
// is guided by the message descriptor, so errors name the file, the line,
// the field path and the problem ("job.yaml:4:3: field 'gpus_per_node':
// expected an integer, got 'eight'") before protobuf ever sees the text.
// Ranges come from the owning module's table (common/field_range.h), which
// this layer checks as it converts, so range errors carry the line too;
// other semantic checks (divisibility) belong to the module that owns the
// message.
//
// Hostile input gets an InvalidArgument naming the file and the problem and
// costs bounded time and memory: texts over kMaxConfigBytes, non-UTF-8
// bytes, nesting deeper than kMaxConfigDepth (checked before the recursive
// YAML parser runs), duplicate keys, and aliases that expand past
// kMaxConfigNodes values.
#pragma once

#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "common/field_range.h"
#include "common/status.h"
#include "google/protobuf/message.h"

namespace strata {

inline constexpr size_t kMaxConfigBytes = 1 << 20;  // 1 MiB, by default
inline constexpr int kMaxConfigDepth = 64;          // nesting levels
inline constexpr int64_t kMaxConfigNodes = 200000;  // values, aliases expanded

// Parses `text` (YAML 1.2 or JSON) into `msg`, which is cleared first.
// `source` names the input in error messages (usually the path).
// Numbers (and counts of list entries) whose path `ranges` lists must lie
// in their range. Texts longer than `max_bytes` are refused (strings may
// expand through aliases to 4 x max_bytes). Returns InvalidArgument on any
// syntax, unknown-field, type, range or limit error.
Status ParseConfig(std::string_view text, const std::string& source,
                   google::protobuf::Message* msg,
                   absl::Span<const FieldRange> ranges = {},
                   size_t max_bytes = kMaxConfigBytes);

// Reads the file at `path` (at most max_bytes + 1 bytes) and parses it with
// ParseConfig. NotFound when the file cannot be opened.
Status LoadConfigFile(const std::string& path, google::protobuf::Message* msg,
                      absl::Span<const FieldRange> ranges = {},
                      size_t max_bytes = kMaxConfigBytes);

// Serialises `msg` to JSON with the proto field names (snake_case), printing
// fields that hold default values too, so scripts see a stable shape.
std::string MessageToJson(const google::protobuf::Message& msg,
                          bool pretty = false);

// Reads a whole file into a string; NotFound/Unavailable on error.
StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace strata

// Config loading: YAML or JSON files into protobuf messages.
//
// The pipeline is yaml-cpp -> JSON -> protobuf's JSON parser. The YAML walk
// is guided by the message descriptor, so errors name the file, the line,
// the field path and the problem ("job.yaml:4:3: field 'gpus_per_node':
// expected an integer, got 'eight'") before protobuf ever sees the text.
// Semantic checks (ranges, divisibility) belong to the module that owns the
// message; this layer checks only names and types.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "google/protobuf/message.h"

namespace strata {

// Parses `text` (YAML 1.2 or JSON) into `msg`, which is cleared first.
// `source` names the input in error messages (usually the path).
// Returns InvalidArgument on any syntax, unknown-field or type error.
Status ParseConfig(std::string_view text, const std::string& source,
                   google::protobuf::Message* msg);

// Reads the file at `path` and parses it with ParseConfig. NotFound when the
// file cannot be opened.
Status LoadConfigFile(const std::string& path, google::protobuf::Message* msg);

// Serialises `msg` to JSON with the proto field names (snake_case), printing
// fields that hold default values too, so scripts see a stable shape.
std::string MessageToJson(const google::protobuf::Message& msg,
                          bool pretty = false);

// Reads a whole file into a string; NotFound/Unavailable on error.
StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace strata

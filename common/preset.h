// Loading a config that may be named either by a file path or by the name
// of a preset compiled into the binary (common/embedded.h).
#pragma once

#include <string>
#include <vector>

#include "common/embedded.h"
#include "common/field_range.h"
#include "common/status.h"
#include "google/protobuf/message.h"

namespace strata {

// If `file_or_preset` names an existing file (or looks like a path: contains
// '/' or ends in .yaml/.yml/.json) it is loaded with LoadConfigFile;
// otherwise it must be one of `presets`. An unknown name is NotFound naming
// `kind` and listing the known presets. `ranges` as in ParseConfig.
Status LoadConfigOrPreset(const std::string& file_or_preset,
                          const EmbeddedFile* presets, int num_presets,
                          const std::string& kind,
                          google::protobuf::Message* msg,
                          absl::Span<const FieldRange> ranges = {});

std::vector<std::string> PresetNames(const EmbeddedFile* presets,
                                     int num_presets);

}  // namespace strata

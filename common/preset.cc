#include "common/preset.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config.h"

namespace strata {

std::vector<std::string> PresetNames(const EmbeddedFile* presets,
                                     int num_presets) {
  std::vector<std::string> names;
  for (int i = 0; i < num_presets; ++i) names.push_back(presets[i].name);
  return names;
}

Status LoadConfigOrPreset(const std::string& file_or_preset,
                          const EmbeddedFile* presets, int num_presets,
                          const std::string& kind,
                          google::protobuf::Message* msg,
                          absl::Span<const FieldRange> ranges) {
  struct stat st;
  const bool exists = ::stat(file_or_preset.c_str(), &st) == 0;
  const bool looks_like_path = absl::StrContains(file_or_preset, "/") ||
                               absl::EndsWith(file_or_preset, ".yaml") ||
                               absl::EndsWith(file_or_preset, ".yml") ||
                               absl::EndsWith(file_or_preset, ".json");
  if (exists || looks_like_path)
    return LoadConfigFile(file_or_preset, msg, ranges);
  for (int i = 0; i < num_presets; ++i) {
    if (file_or_preset == presets[i].name) {
      return ParseConfig(presets[i].contents,
                         absl::StrCat(kind, " preset '", file_or_preset, "'"),
                         msg, ranges);
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown ", kind, " preset '", file_or_preset,
      "' (known: ", absl::StrJoin(PresetNames(presets, num_presets), ", "),
      "); or give the path of a YAML/JSON file"));
}

}  // namespace strata

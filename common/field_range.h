// Documented ranges of the numeric fields of a config message (model,
// cluster, job files) and of the command-line flags that feed them. One
// table per file kind is the single source of both the checks and the
// tables in docs/config.md (RangesMarkdown; a unit test keeps the page in
// sync).
//
// A path names a field from the message root with dots ("gpu.memory_gib",
// "network.nodes_per_leaf"); a path through a repeated message field checks
// every element ("nics.gbps" covers nics[0].gbps, nics[1].gbps, ...). When
// the path ends at a repeated field, the range bounds its number of
// elements. Fields with presence ("optional" scalars, sub-messages) are
// checked only when set, so "absent" keeps its documented default while an
// explicit out-of-range value (e.g. `num_nodes: 0`) is an error.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/status.h"
#include "google/protobuf/message.h"

namespace strata {

struct FieldRange {
  const char* path;
  double min;  // inclusive, unless min_exclusive
  double max;  // inclusive
  bool min_exclusive;
  const char* meaning;  // one line for the docs: unit, what absent means
};

// The entry for `path` (indices like "[3]" are ignored), or nullptr.
const FieldRange* FindRange(absl::Span<const FieldRange> table,
                            absl::string_view path);

// "[1, 4096]" or "(0, 1]".
std::string RangeText(const FieldRange& r);

// OK when `value` lies in `r`; otherwise InvalidArgument
// "<what> = <value> is out of range [min, max]" (`what` names the field or
// flag, e.g. "field 'num_layers'" or "--gpus"). NaN is out of any range.
Status CheckValue(double value, const FieldRange& r, absl::string_view what);

// Checks every field of `msg` that `table` lists. Errors start with
// `where` (e.g. "model 'gpt3-175b'") and name the field path with indices.
Status CheckRanges(const google::protobuf::Message& msg,
                   absl::Span<const FieldRange> table, absl::string_view where);

// The table as a Markdown table: field, range, meaning.
std::string RangesMarkdown(absl::Span<const FieldRange> table);

}  // namespace strata

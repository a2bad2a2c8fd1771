// `strata plan --format json`: the PlanReport as JSON (proto field names,
// defaults printed, as common/config.h MessageToJson writes it), with the
// best plan's placement streamed rather than converted whole: at 131,072
// ranks protobuf's converter held about 1 GB for a 25 MB text.
#pragma once

#include <cstdio>

#include "proto/plan.pb.h"

namespace strata::cli {

// Writes `report` and a newline to `out`, moving the best plan's placement
// out of it (so it is not copied). The placement object comes first among
// the best plan's fields (JSON objects are unordered; ParseConfig and
// protobuf's JSON parser read it back into the same message).
void WritePlanJson(PlanReport* report, std::FILE* out);

}  // namespace strata::cli

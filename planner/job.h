// JobSpec files (`strata submit/run JOB.yaml`, `strata plan` flags): the
// documented range of every numeric field and the static checks a job
// passes before anything runs. Checks against live workers and coordinator
// limits happen at submission (coordinator/).
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/config.h"
#include "common/field_range.h"
#include "common/status.h"
#include "proto/job.pb.h"

namespace strata::planner {

// Largest accepted global batch, in sequences (docs/config.md).
inline constexpr int64_t kMaxGlobalBatch = 1 << 24;

// The documented range of every numeric JobSpec field (docs/config.md).
absl::Span<const FieldRange> JobRanges();

// InvalidArgument "<where>: field 'launch.nodes' = 0 is out of range
// [1, 131072]" for the first field outside JobRanges.
Status ValidateJob(const JobSpec& job, absl::string_view where);

// Loads and validates a JobSpec YAML/JSON file of at most `max_bytes`
// (ParseConfig's limits otherwise; large launch.env maps need more than
// the default).
StatusOr<JobSpec> LoadJob(const std::string& path,
                          size_t max_bytes = kMaxConfigBytes);

}  // namespace strata::planner

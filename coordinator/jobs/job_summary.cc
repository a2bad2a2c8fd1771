#include "coordinator/jobs/job_summary.h"

#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/util/field_mask_util.h>

namespace strata::coordinator {
namespace {

using google::protobuf::FieldMask;
using google::protobuf::util::FieldMaskUtil;

// Every field of JobInfo except the lists that grow with nodes and ranks,
// made once from the descriptor (new fields are included by default).
const FieldMask& SummaryMask() {
  static const FieldMask* mask = [] {
    FieldMask all = FieldMaskUtil::GetFieldMaskForAllFields<control::JobInfo>();
    FieldMask per_rank;
    for (const char* path : {"nodes", "node_info", "ranks", "plan.placement.ranks",
                             "plan.placement.groups"}) {
      per_rank.add_paths(path);
    }
    auto* out = new FieldMask;
    FieldMaskUtil::Subtract<control::JobInfo>(all, per_rank, out);
    return out;
  }();
  return *mask;
}

}  // namespace

control::JobInfo JobSummary(const control::JobInfo& job) {
  control::JobInfo out;
  FieldMaskUtil::MergeOptions options;
  FieldMaskUtil::MergeMessageTo(job, SummaryMask(), options, &out);
  // The mask walks into plan and plan.placement: merging creates them even
  // where `job` has none; a summary must not say a pending job has a plan.
  if (!job.has_plan()) {
    out.clear_plan();
  } else if (!job.plan().has_placement()) {
    out.mutable_plan()->clear_placement();
  }
  return out;
}

}  // namespace strata::coordinator

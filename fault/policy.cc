#include "fault/policy.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::fault {
namespace {

using google::protobuf::FieldDescriptor;

FaultPolicy::Action Or(FaultPolicy::Action a, FaultPolicy::Action def) {
  return a == FaultPolicy::default_action ? def : a;
}

}  // namespace

ResolvedPolicy Resolve(const FaultPolicy& p) {
  ResolvedPolicy r;
  r.straggler = Or(p.straggler(), FaultPolicy::report);
  r.slow_link = Or(p.slow_link(), FaultPolicy::report);
  r.hang = Or(p.hang(), FaultPolicy::restart);
  if (p.has_straggler_threshold())
    r.straggler_options.threshold = p.straggler_threshold();
  if (p.has_straggler_fast_threshold())
    r.straggler_options.fast_threshold = p.straggler_fast_threshold();
  if (p.has_straggler_confirm())
    r.straggler_options.confirm = p.straggler_confirm();
  if (p.has_straggler_confirm_s())
    r.straggler_options.confirm_s = p.straggler_confirm_s();
  if (p.has_hang_k()) r.hang_options.k = p.hang_k();
  if (p.has_hang_floor_s()) r.hang_options.floor_ms = p.hang_floor_s() * 1000LL;
  if (p.has_hang_first_step_s())
    r.hang_options.first_step_ms = p.hang_first_step_s() * 1000LL;
  if (p.has_hang_phase_s()) r.hang_options.phase_ms = p.hang_phase_s() * 1000LL;
  if (p.has_restart_cost_s()) r.restart_cost_s = p.restart_cost_s();
  if (p.has_slow_link_threshold())
    r.slow_link_options.threshold = p.slow_link_threshold();
  return r;
}

const std::vector<std::string>& FaultKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    const auto* d = FaultPolicy::descriptor();
    for (int i = 0; i < d->field_count(); ++i) k.push_back(d->field(i)->name());
    return k;
  }();
  return keys;
}

const char* ActionName(FaultPolicy::Action action) {
  switch (action) {
    case FaultPolicy::report:
      return "report";
    case FaultPolicy::restart:
      return "restart";
    case FaultPolicy::evict:
      return "evict";
    case FaultPolicy::rebalance:
      return "rebalance";
    default:
      return "default";
  }
}

Status ApplyFaultSetting(absl::string_view key_value, FaultPolicy* policy) {
  const size_t eq = key_value.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fault setting '", key_value,
        "' is not key=value (keys: ", absl::StrJoin(FaultKeys(), ", "), ")"));
  }
  const std::string key(key_value.substr(0, eq));
  const std::string value(key_value.substr(eq + 1));
  const FieldDescriptor* f = FaultPolicy::descriptor()->FindFieldByName(key);
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown fault key '", key,
                     "' (keys: ", absl::StrJoin(FaultKeys(), ", "), ")"));
  }
  const auto* refl = policy->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* v = f->enum_type()->FindValueByName(value);
      if (v == nullptr || v->number() == FaultPolicy::default_action) {
        return absl::InvalidArgumentError(
            absl::StrCat("fault key '", key, "' = '", value,
                         "' is not an action (report, restart, evict, rebalance)"));
      }
      refl->SetEnum(policy, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double d = 0;
      if (!absl::SimpleAtod(value, &d) || !std::isfinite(d)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fault key '", key, "' = '", value, "' is not a number"));
      }
      refl->SetDouble(policy, f, d);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t i = 0;
      if (!absl::SimpleAtoi(value, &i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fault key '", key, "' = '", value, "' is not an integer"));
      }
      refl->SetInt32(policy, f, i);
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("fault key '" + key + "' has no parser");
  }
}

}  // namespace strata::fault

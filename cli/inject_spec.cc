#include "cli/inject_spec.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata::cli {
namespace {

Status Bad(const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--inject '", text, "': ", why,
                   " (KIND:key=value,... with KIND slow, hang, kill-rank, "
                   "kill-worker or slow-node; docs/fault.md)"));
}

}  // namespace

StatusOr<InjectSpec> ParseInjectSpec(const std::string& text) {
  InjectSpec s;
  s.text = text;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (kind == "slow") {
    s.kind = InjectSpec::Kind::kSlow;
  } else if (kind == "hang") {
    s.kind = InjectSpec::Kind::kHang;
  } else if (kind == "kill-rank") {
    s.kind = InjectSpec::Kind::kKillRank;
  } else if (kind == "kill-worker") {
    s.kind = InjectSpec::Kind::kKillWorker;
  } else if (kind == "slow-node") {
    s.kind = InjectSpec::Kind::kSlowNode;
  } else {
    return Bad(text, "unknown kind '" + kind + "'");
  }
  if (colon != std::string::npos) {
    for (absl::string_view kv :
         absl::StrSplit(text.substr(colon + 1), ',', absl::SkipEmpty())) {
      const size_t eq = kv.find('=');
      if (eq == absl::string_view::npos) {
        return Bad(text, absl::StrCat("'", kv, "' is not key=value"));
      }
      const std::string key(kv.substr(0, eq)), value(kv.substr(eq + 1));
      bool ok = false;
      auto in = [&](double v, double lo, double hi) {
        return v >= lo && v <= hi;
      };
      if (key != "rank" && key != "node" && key != "factor" && key != "step" &&
          key != "duration" && key != "period_ms") {
        return Bad(text, "unknown key '" + key + "'");
      }
      double d = 0;
      if (!absl::SimpleAtod(value, &d)) {
        return Bad(text, absl::StrCat(key, "=", value, " is not a number"));
      }
      // Range first, then the conversion (a huge or NaN double must never
      // reach an integer cast).
      const bool whole = d == std::floor(d);
      if (key == "rank") {
        ok = in(d, 0, 1 << 20) && whole;
      } else if (key == "node") {
        ok = in(d, 0, 131072) && whole;
      } else if (key == "factor") {
        ok = d > 1 && d <= 1000;
      } else if (key == "step") {
        ok = in(d, 0, 1e15) && whole;
      } else if (key == "duration") {
        ok = in(d, 0, 86400);
      } else if (key == "period_ms") {
        ok = in(d, 2, 60000) && whole;
      }
      if (!ok)
        return Bad(text, absl::StrCat(key, "=", value, " is out of range"));
      if (key == "rank") s.rank = static_cast<int>(d);
      if (key == "node") s.node = static_cast<int>(d);
      if (key == "factor") s.factor = d;
      if (key == "step") s.step = static_cast<int64_t>(d);
      if (key == "duration") s.duration_s = d;
      if (key == "period_ms") s.period_ms = static_cast<int>(d);
    }
  }
  const bool on_node = s.kind == InjectSpec::Kind::kKillWorker ||
                       s.kind == InjectSpec::Kind::kSlowNode;
  if (on_node) {
    if (s.node < 0) return Bad(text, kind + " needs node=K");
  } else if (s.rank < 0) {
    return Bad(text, kind + " needs rank=R");
  }
  if ((s.kind == InjectSpec::Kind::kSlow ||
       s.kind == InjectSpec::Kind::kSlowNode) &&
      s.factor == 0) {
    return Bad(text, kind + " needs factor=F (> 1)");
  }
  return s;
}

std::vector<std::string> InjectArgs(const InjectSpec& s, int pid) {
  const bool slow = s.kind == InjectSpec::Kind::kSlow ||
                    s.kind == InjectSpec::Kind::kSlowNode;
  std::vector<std::string> args = {
      slow                                ? "slow"
      : s.kind == InjectSpec::Kind::kHang ? "hang"
                                          : "kill",
      s.kind == InjectSpec::Kind::kSlowNode ? "--children-of" : "--pid",
      std::to_string(pid)};
  if (slow) {
    args.insert(args.end(), {"--factor", absl::StrCat(s.factor), "--period-ms",
                             std::to_string(s.period_ms)});
  }
  if (s.kind != InjectSpec::Kind::kKillRank && s.duration_s >= 0) {
    args.insert(args.end(), {"--duration", absl::StrCat(s.duration_s)});
  }
  return args;
}

}  // namespace strata::cli

#include "observe/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace strata::observe {
namespace {

bool ValidName(const std::string& s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || (allow_colon && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Sample values: Go's strconv formatting as Prometheus prints them
// (shortest round-trip, +Inf, -Inf, NaN).
std::string Value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  // Prefer the shortest representation that reads back exactly.
  for (int p = 1; p <= 17; ++p) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", p, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

// Label values: backslash, double quote and line feed are escaped.
std::string Escape(const std::string& s, bool help) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && !help) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string LabelSet(const std::vector<std::string>& names,
                     const Labels& values, const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"",
                    Escape(values[i], false), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, out.empty() ? "" : ",", extra);
  return out.empty() ? "" : absl::StrCat("{", out, "}");
}

}  // namespace

const std::vector<double>& SecondsBuckets() {
  static const std::vector<double> buckets = [] {
    std::vector<double> b;
    for (double v = 0.001; v < 70; v *= 2) b.push_back(v);
    return b;
  }();
  return buckets;
}

Status Registry::Define(const std::string& name, MetricType type,
                        const std::string& help,
                        std::vector<std::string> label_names,
                        std::vector<double> buckets) {
  if (!ValidName(name, /*allow_colon=*/true) ||
      !absl::StartsWith(name, "strata_")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric name '", name,
        "' must start with strata_ and match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  for (const Family& f : families_) {
    if (f.name == name) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, " defined twice"));
    }
  }
  if (type == MetricType::kCounter && !absl::EndsWith(name, "_total")) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter ", name, " must end in _total"));
  }
  for (const std::string& l : label_names) {
    if (!ValidName(l, false) || absl::StartsWith(l, "__") ||
        (type == MetricType::kHistogram && l == "le")) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, ": bad label name '", l, "'"));
    }
  }
  if (type != MetricType::kHistogram && !buckets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric ", name, ": buckets on a non-histogram"));
  }
  if (type == MetricType::kHistogram &&
      (buckets.empty() || !std::is_sorted(buckets.begin(), buckets.end()) ||
       std::adjacent_find(buckets.begin(), buckets.end()) != buckets.end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "histogram ", name, ": buckets must be strictly increasing"));
  }
  families_.push_back(Family{name, help, type, std::move(label_names),
                             std::move(buckets), {}});
  return absl::OkStatus();
}

StatusOr<Registry::Family*> Registry::Find(const std::string& name,
                                           const Labels& labels) {
  for (Family& f : families_) {
    if (f.name != name) continue;
    if (labels.size() != f.label_names.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("metric ", name, " takes ", f.label_names.size(),
                       " label values, got ", labels.size()));
    }
    return &f;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("metric ", name, " is not defined"));
}

Status Registry::Set(const std::string& name, const Labels& labels,
                     double value) {
  ASSIGN_OR_RETURN(Family * f, Find(name, labels));
  if (f->type == MetricType::kHistogram) {
    return absl::FailedPreconditionError(
        absl::StrCat("histogram ", name, " takes observations, not values"));
  }
  f->series[labels].value = value;
  return absl::OkStatus();
}

Status Registry::Observe(const std::string& name, const Labels& labels,
                         double value) {
  ASSIGN_OR_RETURN(Family * f, Find(name, labels));
  if (f->type != MetricType::kHistogram) {
    return absl::FailedPreconditionError(
        absl::StrCat("metric ", name, " is not a histogram"));
  }
  f->series[labels].hist.Add(f->buckets, value);
  return absl::OkStatus();
}

Status Registry::SetHistogram(const std::string& name, const Labels& labels,
                              const HistogramCounts& h) {
  ASSIGN_OR_RETURN(Family * f, Find(name, labels));
  if (f->type != MetricType::kHistogram || h.counts.size() != f->buckets.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "metric ", name, " is not a histogram with ", h.counts.size(),
        " buckets"));
  }
  f->series[labels].hist = h;
  return absl::OkStatus();
}

void HistogramCounts::Add(const std::vector<double>& buckets, double value) {
  counts.resize(buckets.size());
  auto it = std::lower_bound(buckets.begin(), buckets.end(), value);
  if (it != buckets.end()) ++counts[it - buckets.begin()];
  ++count;
  sum += value;
}

std::string Registry::Exposition() const {
  std::string out;
  for (const Family& f : families_) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", Escape(f.help, true), "\n",
                    "# TYPE ", f.name, " ", TypeName(f.type), "\n");
    for (const auto& [labels, s] : f.series) {
      if (f.type != MetricType::kHistogram) {
        absl::StrAppend(&out, f.name, LabelSet(f.label_names, labels), " ",
                        Value(s.value), "\n");
        continue;
      }
      const HistogramCounts& h = s.hist;
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.buckets.size(); ++i) {
        cumulative += i < h.counts.size() ? h.counts[i] : 0;
        absl::StrAppend(
            &out, f.name, "_bucket",
            LabelSet(f.label_names, labels,
                     absl::StrCat("le=\"", Value(f.buckets[i]), "\"")),
            " ", cumulative, "\n");
      }
      absl::StrAppend(&out, f.name, "_bucket",
                      LabelSet(f.label_names, labels, "le=\"+Inf\""), " ",
                      h.count, "\n", f.name, "_sum",
                      LabelSet(f.label_names, labels), " ", Value(h.sum), "\n",
                      f.name, "_count", LabelSet(f.label_names, labels), " ",
                      h.count, "\n");
    }
  }
  return out;
}

}  // namespace strata::observe

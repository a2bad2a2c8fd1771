// Prometheus text exposition (format 0.0.4) of strata's metrics.
//
// A Registry holds metric families — counters, gauges and histograms, each
// with a name, help text and label names — and their series (one per label
// value set). Exposition() renders them in the text format Prometheus
// scrapes: `# HELP` and `# TYPE` lines, then one line per sample, label
// values escaped (backslash, double quote, newline), histograms as
// cumulative `_bucket{le="..."}` series with `+Inf`, `_sum` and `_count`.
// Names follow Prometheus conventions and are checked when a family is
// defined: `strata_` prefix, [a-zA-Z_:][a-zA-Z0-9_:]*, base units (seconds,
// bytes, ratios 0-1), counters end in `_total`.
//
// The coordinator builds a fresh Registry per scrape from its state, so
// nothing here is shared between threads; a Registry is not thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace strata::observe {

enum class MetricType { kCounter, kGauge, kHistogram };

using Labels = std::vector<std::string>;  // values, in the family's order

// A histogram's counts as an owner keeps them between scrapes (a Registry
// is built per scrape): per bucket of the family's `buckets` (not
// cumulative; above the last bucket only in `count`), the total count and
// the sum of the observations.
struct HistogramCounts {
  std::vector<uint64_t> counts;
  uint64_t count = 0;
  double sum = 0;
  void Add(const std::vector<double>& buckets, double value);
};

class Registry {
 public:
  // Defines a family. InvalidArgument for a bad or duplicate name, a bad
  // label name, a counter not ending in `_total`, or histogram `buckets`
  // that are not strictly increasing (buckets only for histograms).
  Status Define(const std::string& name, MetricType type,
                const std::string& help, std::vector<std::string> label_names,
                std::vector<double> buckets = {});

  // Sets a gauge or counter sample (counters are set from the owner's
  // running total, so a scrape reports what the coordinator counted).
  // FailedPrecondition for an undefined family, a histogram, or a wrong
  // number of label values.
  Status Set(const std::string& name, const Labels& labels, double value);

  // Adds one observation to a histogram series.
  Status Observe(const std::string& name, const Labels& labels, double value);
  // Sets a histogram series to counts kept with the family's buckets.
  // FailedPrecondition as for Set, or when the counts have another number
  // of buckets.
  Status SetHistogram(const std::string& name, const Labels& labels,
                      const HistogramCounts& h);

  // The text exposition of every family, in definition order.
  std::string Exposition() const;

 private:
  struct Series {
    double value = 0;      // counter, gauge
    HistogramCounts hist;  // histogram
  };
  struct Family {
    std::string name, help;
    MetricType type;
    std::vector<std::string> label_names;
    std::vector<double> buckets;
    std::map<Labels, Series> series;
  };
  StatusOr<Family*> Find(const std::string& name, const Labels& labels);

  std::vector<Family> families_;
};

// Default buckets for step and round-trip seconds: 1 ms to ~65 s, doubling.
const std::vector<double>& SecondsBuckets();

}  // namespace strata::observe

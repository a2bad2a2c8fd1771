#include "observe/metrics.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"

namespace strata::observe {
namespace {

Registry Sample() {
  Registry r;
  EXPECT_TRUE(r.Define("strata_job_step", MetricType::kGauge,
                       "Last step a rank of the job reported.", {"job"})
                  .ok());
  EXPECT_TRUE(r.Define("strata_restarts_total", MetricType::kCounter,
                       "Attempts restarted, by cause.", {"job", "cause"})
                  .ok());
  EXPECT_TRUE(r.Define("strata_step_seconds", MetricType::kHistogram,
                       "Step time.", {"job"}, {0.1, 0.5, 1})
                  .ok());
  EXPECT_TRUE(r.Set("strata_job_step", {"job-1"}, 42).ok());
  EXPECT_TRUE(r.Set("strata_restarts_total", {"job-1", "worker_lost"}, 2).ok());
  for (double v : {0.05, 0.2, 0.3, 0.7, 3.0}) {
    EXPECT_TRUE(r.Observe("strata_step_seconds", {"job-1"}, v).ok());
  }
  return r;
}

TEST(MetricsTest, TextExpositionFormat) {
  EXPECT_EQ(Sample().Exposition(),
            "# HELP strata_job_step Last step a rank of the job reported.\n"
            "# TYPE strata_job_step gauge\n"
            "strata_job_step{job=\"job-1\"} 42\n"
            "# HELP strata_restarts_total Attempts restarted, by cause.\n"
            "# TYPE strata_restarts_total counter\n"
            "strata_restarts_total{job=\"job-1\",cause=\"worker_lost\"} 2\n"
            "# HELP strata_step_seconds Step time.\n"
            "# TYPE strata_step_seconds histogram\n"
            "strata_step_seconds_bucket{job=\"job-1\",le=\"0.1\"} 1\n"
            "strata_step_seconds_bucket{job=\"job-1\",le=\"0.5\"} 3\n"
            "strata_step_seconds_bucket{job=\"job-1\",le=\"1\"} 4\n"
            "strata_step_seconds_bucket{job=\"job-1\",le=\"+Inf\"} 5\n"
            "strata_step_seconds_sum{job=\"job-1\"} 4.25\n"
            "strata_step_seconds_count{job=\"job-1\"} 5\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry r;
  ASSERT_TRUE(r.Define("strata_x", MetricType::kGauge, "a\\b\nc \"q\"", {"l"})
                  .ok());
  ASSERT_TRUE(r.Set("strata_x", {"a\"b\\c\nd"}, 1.5).ok());
  EXPECT_EQ(r.Exposition(),
            "# HELP strata_x a\\\\b\\nc \"q\"\n# TYPE strata_x gauge\n"
            "strata_x{l=\"a\\\"b\\\\c\\nd\"} 1.5\n");
}

TEST(MetricsTest, RejectsWhatPrometheusWouldNot) {
  Registry r;
  EXPECT_FALSE(r.Define("job_step", MetricType::kGauge, "", {}).ok());
  EXPECT_FALSE(r.Define("strata_bad-name", MetricType::kGauge, "", {}).ok());
  EXPECT_FALSE(r.Define("strata_restarts", MetricType::kCounter, "", {}).ok());
  EXPECT_FALSE(r.Define("strata_h", MetricType::kHistogram, "", {"le"}, {1})
                   .ok());
  EXPECT_FALSE(r.Define("strata_h", MetricType::kHistogram, "", {}, {2, 1}).ok());
  EXPECT_FALSE(r.Define("strata_g", MetricType::kGauge, "", {"__x"}).ok());
  ASSERT_TRUE(r.Define("strata_g", MetricType::kGauge, "", {"a"}).ok());
  EXPECT_FALSE(r.Define("strata_g", MetricType::kGauge, "", {}).ok());
  EXPECT_EQ(r.Set("strata_g", {}, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Set("strata_nope", {}, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Observe("strata_g", {"x"}, 1).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MetricsTest, PromtoolAcceptsTheExposition) {
  if (access("/usr/bin/promtool", X_OK) != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  }
  Registry r = Sample();
  ASSERT_TRUE(r.Define("strata_ratio", MetricType::kGauge, "MFU, 0-1.", {})
                  .ok());
  ASSERT_TRUE(r.Set("strata_ratio", {}, 0.41).ok());
  const std::string path =
      testing::TempDir() + "/metrics-" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << r.Exposition();
  const std::string cmd = "promtool check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  const int rc = pclose(p);
  unlink(path.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << "promtool lint findings";
}

}  // namespace
}  // namespace strata::observe

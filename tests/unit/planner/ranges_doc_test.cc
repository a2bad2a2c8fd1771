// docs/config.md shows the range tables the code checks: each table there
// is RangesMarkdown of the code's table, verbatim.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/field_range.h"
#include "planner/job.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {
namespace {

TEST(RangesDocTest, DocsShowEveryTableVerbatim) {
  const char* src = std::getenv("STRATA_SOURCE_DIR");  // set by ctest
  ASSERT_NE(src, nullptr);
  std::ifstream in(std::string(src) + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (auto [name, table] :
       {std::pair{"model", ModelRanges()},
        std::pair{"cluster", topology::ClusterRanges()},
        std::pair{"job", JobRanges()}, std::pair{"plan", PlanRanges()}}) {
    const std::string md = RangesMarkdown(table);
    EXPECT_NE(doc.find(md), std::string::npos)
        << "docs/config.md lacks the " << name << " table:\n"
        << md;
  }
}

}  // namespace
}  // namespace strata::planner

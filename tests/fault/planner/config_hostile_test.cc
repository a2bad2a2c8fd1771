// Hostile YAML in config files: deep nesting, alias bombs, huge scalars,
// duplicate keys, non-UTF-8 bytes, complex keys, wrong types. Each is an
// InvalidArgument naming the file and the problem, in bounded time and
// memory, never a crash or a stack overflow.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/config.h"
#include "planner/job.h"
#include "planner/model.h"
#include "proto/model.pb.h"
#include "proto/topology.pb.h"
#include "topology/cluster.h"

namespace strata {
namespace {

// Parses `text` as a model file; asserts a quick InvalidArgument whose
// message names the file and contains `what`.
void ExpectRejected(const std::string& text, const std::string& what) {
  ModelSpec m;
  const auto start = std::chrono::steady_clock::now();
  Status st = ParseConfig(text, "hostile.yaml", &m, planner::ModelRanges());
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  const std::string msg(st.message());
  EXPECT_EQ(msg.rfind("hostile.yaml", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
  EXPECT_LT(s, 2.0) << msg;
}

TEST(ConfigHostileTest, DeepFlowNestingNamesTheLimitAndTheLine) {
  // 100k levels used to end in yaml-cpp's "bad file".
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ExpectRejected("name: x\nnum_layers: " + deep + "\n",
                 "hostile.yaml:2: nesting deeper than 64 levels");
  ExpectRejected("name: x\nsource: " + std::string(65, '{') + "\n",
                 "nesting deeper than 64 levels");
}

TEST(ConfigHostileTest, DeepBlockNestingNamesTheLimitAndTheLine) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += std::string(i, ' ') + "a:\n";
  ExpectRejected(text, "hostile.yaml:65: nesting deeper than 64 levels");
  std::string items;
  for (int i = 0; i < 100; ++i) items += "- ";
  ExpectRejected("source:\n" + items + "x\n", "nesting deeper than 64");
}

// `overrides: [{nics: *n}, ...]` with an anchored list of 1000 NICs: a
// million NICs once expanded, from a 30 KB file.
std::string AliasBomb() {
  std::string nics = "[";
  for (int k = 0; k < 1000; ++k) nics += k ? ",{count: 1}" : "{count: 1}";
  std::string doc = "nics: &n " + nics + "]\noverrides: [";
  for (int k = 0; k < 1000; ++k) doc += k ? ", {nics: *n}" : "{nics: *n}";
  return doc + "]\n";
}

Status TimedParse(const std::string& text, absl::Span<const FieldRange> r,
                  double* seconds) {
  ClusterSpec c;
  const auto start = std::chrono::steady_clock::now();
  Status st = ParseConfig(text, "bomb.yaml", &c, r);
  *seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return st;
}

TEST(ConfigHostileTest, AliasBombStopsAtTheEntryRange) {
  double s = 0;
  Status st = TimedParse(AliasBomb(), topology::ClusterRanges(), &s);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("field 'nics': the number of entries = 1000 "
                              "is out of range [0, 64]"),
            std::string::npos)
      << st;
  EXPECT_LT(s, 2.0);
}

TEST(ConfigHostileTest, AliasBombStopsAtTheNodeBudgetWithoutRanges) {
  double s = 0;
  Status st = TimedParse(AliasBomb(), {}, &s);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("more than 200000 values"), std::string::npos)
      << st;
  EXPECT_LT(s, 2.0);
}

TEST(ConfigHostileTest, HugeScalarsAndFilesAreRejected) {
  ExpectRejected("name: " + std::string(2 << 20, 'x') + "\n",
                 "config files are limited to 1048576 bytes");
  ExpectRejected("hidden_size: " + std::string(1000, '9') + "\n",
                 "field 'hidden_size': value = 999999");
}

TEST(ConfigHostileTest, DuplicateKeysAreRejected) {
  ExpectRejected("num_layers: 2\nhidden_size: 64\nnum_layers: 3\n",
                 "hostile.yaml:3:1: field 'num_layers': duplicate key (first "
                 "given at line 1)");
}

TEST(ConfigHostileTest, NonUtf8AndNulBytesAreRejected) {
  ExpectRejected("name: ok\nsource: \xff\xfe\n", "hostile.yaml:2: not UTF-8");
  ExpectRejected(std::string("name: a\0b\n", 10), "not UTF-8");
  ExpectRejected("source: \xed\xa0\x80\n", "not UTF-8");  // a surrogate
}

TEST(ConfigHostileTest, WrongTypesAndComplexKeysAreRejected) {
  ExpectRejected("? [a, b]\n: 1\n", "a key must be a plain name");
  ExpectRejected("num_layers: [1, 2]\n", "expected a scalar value");
  ExpectRejected("num_layers: 1e3\n", "expected an integer");
  ExpectRejected("hidden_size: .nan\n", "expected an integer");
  ExpectRejected("num_layers: {a: 1}\n", "expected a scalar value");
  ExpectRejected("- 1\n- 2\n", "expected a mapping");
}

}  // namespace
}  // namespace strata

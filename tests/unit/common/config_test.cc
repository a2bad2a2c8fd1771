#include "common/config.h"

#include "gtest/gtest.h"
#include "proto/topology.pb.h"

namespace strata {
namespace {

TEST(ConfigTest, ParsesYamlIntoProtoWithNestedAndRepeatedFields) {
  ClusterSpec c;
  ASSERT_TRUE(ParseConfig(R"(
name: lab
gpu: {name: A100, peak_bf16_tflops: 312, memory_gib: 80}
gpus_per_node: 8
nics:
  - {count: 8, gbps: 200, type: ib}
  - {count: 1, gbps: 100, type: ETHERNET}
network: {oversubscription: 1.5}
)",
                          "lab.yaml", &c)
                  .ok());
  EXPECT_EQ(c.name(), "lab");
  EXPECT_DOUBLE_EQ(c.gpu().peak_bf16_tflops(), 312);
  EXPECT_EQ(c.gpus_per_node(), 8);
  ASSERT_EQ(c.nics_size(), 2);
  EXPECT_EQ(c.nics(1).type(), Nic::ethernet);  // enum names case-insensitive
  EXPECT_DOUBLE_EQ(c.network().oversubscription(), 1.5);
}

TEST(ConfigTest, ParsesJson) {
  ClusterSpec c;
  ASSERT_TRUE(
      ParseConfig(R"({"name": "j", "gpus_per_node": 4})", "c.json", &c).ok());
  EXPECT_EQ(c.gpus_per_node(), 4);
}

TEST(ConfigTest, UnknownFieldNamesFileLineFieldAndKnownFields) {
  ClusterSpec c;
  Status st = ParseConfig("name: x\ngpus_per_nod: 8\n", "bad.yaml", &c);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(st.message());
  EXPECT_NE(msg.find("bad.yaml:2:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpus_per_nod"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpus_per_node"), std::string::npos) << msg;  // hint
}

TEST(ConfigTest, TypeErrorsNameTheFieldPath) {
  ClusterSpec c;
  Status st = ParseConfig("nics:\n  - {count: eight}\n", "n.yaml", &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nics[0].count"), std::string::npos) << st;
  EXPECT_NE(st.message().find("expected an integer, got 'eight'"),
            std::string::npos)
      << st;
  st = ParseConfig("gpu: {memory_gib: lots}\n", "g.yaml", &c);
  EXPECT_NE(st.message().find("gpu.memory_gib': expected a number"),
            std::string::npos)
      << st;
  st = ParseConfig("nics: [{type: infiniband}]\n", "t.yaml", &c);
  EXPECT_NE(st.message().find("not one of: ib, roce, ethernet"),
            std::string::npos)
      << st;
  st = ParseConfig("gpus_per_node: 99999999999\n", "r.yaml", &c);
  EXPECT_NE(st.message().find("out of range"), std::string::npos) << st;
}

TEST(ConfigTest, MalformedYamlIsAnErrorNotACrash) {
  ClusterSpec c;
  Status st = ParseConfig("name: [unclosed\n", "m.yaml", &c);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("m.yaml"), std::string::npos);
  st = ParseConfig("- just\n- a list\n", "l.yaml", &c);
  EXPECT_NE(st.message().find("expected a mapping"), std::string::npos) << st;
}

TEST(ConfigTest, MissingFileIsNotFound) {
  ClusterSpec c;
  EXPECT_EQ(LoadConfigFile("/nonexistent/x.yaml", &c).code(),
            absl::StatusCode::kNotFound);
}

TEST(ConfigTest, JsonOutputUsesProtoFieldNamesAndPrintsDefaults) {
  ClusterSpec c;
  c.set_gpus_per_node(8);
  std::string json = MessageToJson(c);
  EXPECT_NE(json.find("\"gpus_per_node\":8"), std::string::npos) << json;
  EXPECT_NE(json.find("\"intra_node_gbps\":0"), std::string::npos) << json;
}

}  // namespace
}  // namespace strata

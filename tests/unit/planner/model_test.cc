// Parameter and FLOP formulas against hand-computed values from the papers.
#include "planner/model.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"

namespace strata::planner {
namespace {

struct Row {
  const char* preset;
  double billions;  // Narayanan et al. SC'21 Table 1
  int heads, hidden, layers;
};
const Row kTable1[] = {{"gpt-1.7b", 1.7, 24, 2304, 24},
                       {"gpt-3.6b", 3.6, 32, 3072, 30},
                       {"gpt-7.5b", 7.5, 32, 4096, 36},
                       {"gpt-18.4b", 18.4, 48, 6144, 40},
                       {"gpt-39.1b", 39.1, 64, 8192, 48},
                       {"gpt-76.1b", 76.1, 80, 10240, 60},
                       {"gpt-145.6b", 145.6, 96, 12288, 80},
                       {"gpt-310.1b", 310.1, 128, 16384, 96},
                       {"gpt-529.6b", 529.6, 128, 20480, 105},
                       {"gpt-1t", 1008.0, 160, 25600, 128}};

// Within 1%, or within the table's rounding to 0.1B for the two smallest
// rows (eq. 2 gives 1.652B and 3.562B, printed as 1.7 and 3.6).
TEST(ModelTest, Table1ParameterCountsWithinOnePercent) {
  for (const Row& row : kTable1) {
    auto m = LoadModel(row.preset);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->num_attention_heads(), row.heads);
    EXPECT_EQ(m->hidden_size(), row.hidden);
    EXPECT_EQ(m->num_layers(), row.layers);
    const double p = CountParameters(*m, 2048).Total(m->num_layers());
    EXPECT_NEAR(p / 1e9, row.billions, std::max(0.01 * row.billions, 0.05))
        << row.preset;
  }
}

TEST(ModelTest, GptCountEqualsNarayananEquation2) {
  // P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)), plus the final norm (2h)
  // that eq. 2 leaves out.
  auto m = LoadModel("gpt-145.6b");
  ASSERT_TRUE(m.ok());
  const double l = 80, h = 12288, V = 51200, s = 2048;
  const double eq2 =
      12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
  EXPECT_DOUBLE_EQ(CountParameters(*m, 2048).Total(80), eq2 + 2 * h);
}

TEST(ModelTest, Llama3ParameterCountsMatchModelCards) {
  // Meta model cards: 8.03B, 70.6B, 405.9B (Llama 3.1 405B).
  EXPECT_NEAR(CountParameters(*LoadModel("llama3-8b"), 8192).Total(32) / 1e9,
              8.03, 0.01 * 8.03);
  EXPECT_NEAR(CountParameters(*LoadModel("llama3-70b"), 8192).Total(80) / 1e9,
              70.6, 0.01 * 70.6);
  EXPECT_NEAR(CountParameters(*LoadModel("llama3-405b"), 8192).Total(126) / 1e9,
              405.9, 0.01 * 405.9);
}

TEST(ModelTest, FullRecomputeFlopsEqualNarayananEquation3) {
  // F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
  auto m = LoadModel("gpt-1t");
  ASSERT_TRUE(m.ok());
  const double B = 3072, s = 2048, l = 128, h = 25600, V = 51200;
  const double eq3 =
      96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  StepFlops f = TrainingFlops(*m, 3072, 2048, Recompute::full);
  EXPECT_NEAR(f.Hardware() / eq3, 1.0, 1e-12);
  // Without recompute: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
  const double model =
      72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(f.model / model, 1.0, 1e-12);
  EXPECT_NEAR(TrainingFlops(*m, 3072, 2048, Recompute::none).Hardware() / model,
              1.0, 1e-12);
}

TEST(ModelTest, SelectiveRecomputeAddsOnlyCoreAttention) {
  auto m = LoadModel("gpt-18.4b");
  ASSERT_TRUE(m.ok());
  const double B = 1024, s = 2048, l = 40, h = 6144;
  StepFlops f = TrainingFlops(*m, 1024, 2048, Recompute::selective);
  EXPECT_NEAR(f.recompute / (4 * B * s * s * h * l), 1.0, 1e-12);
}

TEST(ModelTest, BadShapesAreRejectedNamingTheField) {
  ModelSpec m;
  m.set_name("odd");
  m.set_num_layers(4);
  m.set_hidden_size(1000);
  m.set_num_attention_heads(7);
  m.set_vocab_size(100);
  Status st = NormalizeModel(&m);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not divisible by num_attention_heads 7"),
            std::string::npos)
      << st;
  m.set_num_attention_heads(8);
  m.set_num_query_groups(3);
  EXPECT_NE(NormalizeModel(&m).message().find("num_query_groups 3"),
            std::string::npos);
  m.set_num_query_groups(0);
  EXPECT_NE(NormalizeModel(&m).message().find(
                "field 'num_query_groups' = 0 is out of range [1, 65536]"),
            std::string::npos);
  m.clear_num_query_groups();
  m.set_num_layers(-2);
  EXPECT_NE(NormalizeModel(&m).message().find(
                "field 'num_layers' = -2 is out of range [1, 4096]"),
            std::string::npos);
}

TEST(ModelTest, DefaultsAreFilled) {
  ModelSpec m;
  m.set_num_layers(2);
  m.set_hidden_size(64);
  m.set_num_attention_heads(4);
  m.set_vocab_size(10);
  ASSERT_TRUE(NormalizeModel(&m).ok());
  EXPECT_EQ(m.num_query_groups(), 4);
  EXPECT_EQ(m.ffn_hidden_size(), 256);
}

}  // namespace
}  // namespace strata::planner

// AdamW against its closed form, over several steps, and sliced: a tensor updated in any number
// of contiguous slices gets the same bits as updated whole. The references run on PyTorch's
// published defaults (published.h), never on values read from the code under test.
#include "canzona/optim/adamw.h"

#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "published.h"
#include "test_util.h"

namespace canzona::optim {
namespace {

void configure(AdamWOptions& o) {
  o.lr = 0.01;
  o.weight_decay = 0.1;
}

// What the optimizer runs with: its own defaults, lr and weight decay set.
AdamWOptions options() {
  AdamWOptions o;
  configure(o);
  return o;
}

// What the references run with: the published defaults, lr and weight decay set.
AdamWOptions reference_options() {
  AdamWOptions o = published::adamw_options();
  configure(o);
  return o;
}

TEST(AdamW, DefaultsArePyTorchs) {
  {
    SCOPED_TRACE("AdamWOptions{}");
    published::expect_same(AdamWOptions{}, published::adamw_options());
  }
  {
    SCOPED_TRACE("create_optimizer(\"adamw\", {})");
    const auto opt = create_optimizer("adamw", ParamInfo{"w", 1, 8});
    published::expect_same(dynamic_cast<const AdamW&>(*opt).options(), published::adamw_options());
  }
}

// With a constant gradient g, m_hat = g and v_hat = g^2 every step, so each step is
// w <- w d - lr g / (|g| + eps) with d = 1 - lr wd, and after T steps
// w_T = w_0 d^T - lr g / (|g| + eps) * sum_{k<T} d^k.
TEST(AdamW, MatchesClosedFormForConstantGradient) {
  const AdamWOptions o = reference_options();
  const std::int64_t n = 257;
  AdamW adamw(ParamInfo{"w", 1, n}, options());
  std::vector<float> w = test::random_floats(n, 1);
  const std::vector<float> w0 = w;
  std::vector<float> g = test::random_floats(n, 2, 0.01f);
  g[0] = 0.0f;
  const int steps = 7;
  for (int t = 1; t <= steps; ++t) adamw.step_slice(w, g, t);
  const double d = 1 - o.lr * o.weight_decay;
  double geometric = 0;
  for (int k = 0; k < steps; ++k) geometric += std::pow(d, k);
  for (std::int64_t i = 0; i < n; ++i) {
    const double gi = g[i];
    const double expected =
        w0[i] * std::pow(d, steps) - o.lr * gi / (std::abs(gi) + o.eps) * geometric;
    EXPECT_NEAR(w[i], expected, 2e-6 * (1 + std::abs(expected))) << i;
  }
}

TEST(AdamW, MatchesReferenceOverRandomSteps) {
  const AdamWOptions o = reference_options();
  const std::int64_t rows = 9, cols = 13, n = rows * cols;
  AdamW adamw(ParamInfo{"w", rows, cols}, options());
  std::vector<float> w = test::random_floats(n, 3);
  std::vector<double> wr(w.begin(), w.end()), m(n, 0.0), v(n, 0.0);
  for (int t = 1; t <= 5; ++t) {
    const std::vector<float> g = test::random_floats(n, 10 + t, 0.1f);
    adamw.step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
    for (std::int64_t i = 0; i < n; ++i) {
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * double(g[i]) * g[i];
      const double mh = m[i] / (1 - std::pow(o.beta1, t));
      const double vh = v[i] / (1 - std::pow(o.beta2, t));
      wr[i] = wr[i] * (1 - o.lr * o.weight_decay) - o.lr * mh / (std::sqrt(vh) + o.eps);
    }
  }
  EXPECT_EQ(adamw.step_count(), 5);
  for (std::int64_t i = 0; i < n; ++i) EXPECT_NEAR(w[i], wr[i], 2e-6 * (1 + std::abs(wr[i])));
}

// Splits [0, n) at the given cuts; every slice has its own AdamW state.
std::vector<float> run_sliced(const std::vector<std::int64_t>& cuts, std::int64_t n, int steps) {
  std::vector<float> w = test::random_floats(n, 40);
  std::vector<std::unique_ptr<AdamW>> slices;
  std::vector<std::int64_t> bounds = cuts;
  bounds.insert(bounds.begin(), 0);
  bounds.push_back(n);
  for (std::size_t s = 0; s + 1 < bounds.size(); ++s)
    slices.push_back(
        std::make_unique<AdamW>(ParamInfo{"embedding", 1, bounds[s + 1] - bounds[s]}, options()));
  for (int t = 1; t <= steps; ++t) {
    const std::vector<float> g = test::random_floats(n, 41 + t, 0.1f);
    for (std::size_t s = 0; s + 1 < bounds.size(); ++s) {
      const std::size_t begin = bounds[s], len = bounds[s + 1] - bounds[s];
      slices[s]->step_slice(std::span<float>(w).subspan(begin, len),
                            std::span<const float>(g).subspan(begin, len), t);
    }
  }
  return w;
}

TEST(AdamW, SlicedUpdateEqualsWholeUpdateBitwise) {
  const std::int64_t n = 1001;
  const std::vector<float> whole = run_sliced({}, n, 4);
  for (const std::vector<std::int64_t>& cuts : std::vector<std::vector<std::int64_t>>{
           {500}, {1}, {1000}, {333, 334}, {7, 64, 65, 900}, {0, 0, 1001}}) {
    SCOPED_TRACE(::testing::Message() << "cuts " << cuts.size() << " first " << cuts[0]);
    EXPECT_TRUE(test::same_bits(run_sliced(cuts, n, 4), whole));
  }
  // And the matrix step on a 7 x 143 view of the same tensor.
  std::vector<float> w = test::random_floats(n, 40);
  AdamW matrix(ParamInfo{"embedding", 7, 143}, options());
  for (int t = 1; t <= 4; ++t) {
    const std::vector<float> g = test::random_floats(n, 41 + t, 0.1f);
    matrix.step(matrix_view(w.data(), 7, 143), matrix_view(g.data(), 7, 143));
  }
  EXPECT_TRUE(test::same_bits(w, whole));
}

TEST(AdamW, ZeroGradientOnlyDecays) {
  AdamW adamw(ParamInfo{"w", 1, 10}, options());
  std::vector<float> w = test::random_floats(10, 5), before = w;
  const std::vector<float> zero(10, 0.0f);
  adamw.step_slice(w, zero, 1);
  const float decay = static_cast<float>(1.0 - 0.01 * 0.1);
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], before[i] * decay);
}

TEST(AdamW, NonFiniteGradientThrowsAndLeavesSliceUntouched) {
  AdamW adamw(ParamInfo{"embedding[4096:8192]", 1, 6}, options());
  std::vector<float> w(6, 1.0f), g(6, 0.1f);
  g[4] = std::nanf("");
  try {
    adamw.step_slice(w, g, 1);
    FAIL() << "expected canzona::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("embedding[4096:8192]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("element 4"), std::string::npos) << e.what();
  }
  for (float x : w) EXPECT_EQ(x, 1.0f);
}

TEST(AdamW, RejectsBadSlicesAndOptions) {
  AdamW adamw(ParamInfo{"w", 1, 4}, options());
  std::vector<float> w(4), g(3);
  EXPECT_THROW(adamw.step_slice(w, g, 1), UsageError);
  std::vector<float> m(4), v(4), g4(4);
  EXPECT_THROW(adamw_update(w, g4, m, v, 0, options()), UsageError);
  AdamWOptions o = options();
  o.beta2 = 1.0;
  EXPECT_THROW(AdamW(ParamInfo{"w", 1, 4}, o), UsageError);
}

}  // namespace
}  // namespace canzona::optim

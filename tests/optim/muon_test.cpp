// Muon and Newton–Schulz against plain-loop double references, the singular-value band, the
// eps / zero / non-finite paths and bitwise repeatability; the coefficient tables, the defaults,
// the update scale and the FLOP count pinned to the published values (published.h), which the
// references also run on: nothing expected here is read from the code under test.
#include "canzona/optim/muon.h"

#include <gtest/gtest.h>
#include <lapacke.h>

#include <optional>
#include <string>

#include "canzona/common/error.h"
#include "ns_reference.h"
#include "published.h"
#include "test_util.h"

namespace canzona::optim {
namespace {

using test::DMat;

// docs/references.md "Muon": 0.2 sqrt(max(rows, cols)) of the full (un-split) shape, or Keller
// Jordan's sqrt(max(1, rows / cols)).
double reference_update_scale(const ParamInfo& p, MuonScale scale) {
  const double full_rows = static_cast<double>(p.full_rows > 0 ? p.full_rows : p.rows);
  const double full_cols = static_cast<double>(p.full_cols > 0 ? p.full_cols : p.cols);
  if (scale == MuonScale::kSpectral) return 0.2 * std::sqrt(std::max(full_rows, full_cols));
  return std::sqrt(std::max(1.0, static_cast<double>(p.rows) / static_cast<double>(p.cols)));
}

// Muon's step in double. `opt` must be built by the test (published::muon_options() plus
// overrides), never taken from the optimizer under test.
struct ReferenceMuon {
  ParamInfo param;
  MuonOptions o;
  double scale;
  DMat b;

  ReferenceMuon(ParamInfo p, MuonOptions opt)
      : param(p), o(opt), scale(reference_update_scale(p, opt.scale)), b(p.rows, p.cols) {}
  void step(DMat& w, const DMat& g) {
    DMat u(g.rows, g.cols);
    for (std::size_t k = 0; k < g.v.size(); ++k) {
      b.v[k] = b.v[k] + (1 - o.momentum) * (g.v[k] - b.v[k]);
      u.v[k] = o.nesterov ? g.v[k] + o.momentum * (b.v[k] - g.v[k]) : b.v[k];
    }
    const DMat x = test::reference_newton_schulz(u, o.ns);
    for (std::size_t k = 0; k < w.v.size(); ++k)
      w.v[k] = w.v[k] * (1 - o.lr * o.weight_decay) - o.lr * scale * x.v[k];
  }
};

std::vector<double> singular_values(const std::vector<float>& a, std::int64_t rows,
                                    std::int64_t cols) {
  std::vector<float> copy = a;
  const std::int64_t k = std::min(rows, cols);
  std::vector<float> s(k), superb(std::max<std::int64_t>(k, 2));
  const lapack_int info = LAPACKE_sgesvd(LAPACK_ROW_MAJOR, 'N', 'N', rows, cols, copy.data(), cols,
                                         s.data(), nullptr, 1, nullptr, 1, superb.data());
  EXPECT_EQ(info, 0);
  return std::vector<double>(s.begin(), s.end());
}

// Random orthonormal n x n (Gram–Schmidt in double on a seeded Gaussian matrix).
DMat random_orthogonal(std::int64_t n, std::uint32_t seed) {
  const std::vector<float> g = test::random_floats(n * n, seed);
  DMat q = test::to_dmat(g, n, n);
  for (std::int64_t j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (std::int64_t i = 0; i < n; ++i) dot += q(i, j) * q(i, k);
        for (std::int64_t i = 0; i < n; ++i) q(i, j) -= dot * q(i, k);
      }
    double norm = 0;
    for (std::int64_t i = 0; i < n; ++i) norm += q(i, j) * q(i, j);
    for (std::int64_t i = 0; i < n; ++i) q(i, j) /= std::sqrt(norm);
  }
  return q;
}

// Every triple of a set equals the published one rounded to float, and the set has the
// published length.
void expect_published_table(NsCoefficients set) {
  const std::span<const NsTriple> got = ns_coefficients(set);
  const std::span<const published::Triple> want = published::table(set);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << to_string(set) << " triple " << i);
    EXPECT_EQ(got[i].a, static_cast<float>(want[i].a));
    EXPECT_EQ(got[i].b, static_cast<float>(want[i].b));
    EXPECT_EQ(got[i].c, static_cast<float>(want[i].c));
  }
}

TEST(NewtonSchulz, SimpleTableIsKellerJordans) {
  expect_published_table(NsCoefficients::kSimple);
}

TEST(NewtonSchulz, QuinticTableIsThePublishedOne) {
  expect_published_table(NsCoefficients::kQuintic);
}

TEST(NewtonSchulz, PolarExpressTableIsThePublishedOne) {
  expect_published_table(NsCoefficients::kPolarExpress);
}

TEST(NewtonSchulz, CoefficientSetNamesParse) {
  EXPECT_EQ(parse_ns_coefficients("simple"), NsCoefficients::kSimple);
  EXPECT_EQ(parse_ns_coefficients("quintic"), NsCoefficients::kQuintic);
  EXPECT_EQ(parse_ns_coefficients("polar_express"), NsCoefficients::kPolarExpress);
  EXPECT_STREQ(to_string(NsCoefficients::kPolarExpress), "polar_express");
  EXPECT_THROW(parse_ns_coefficients("cubic"), UsageError);
}

// A matrix with one non-zero per row in distinct columns has X X^T diagonal, so Newton–Schulz
// acts on each entry as the scalar map x <- a x + b x^3 + c x^5 with no cross terms, and float
// rounding stays at a few ulps per step. Each entry probes the published table at its own
// normalised value sigma_i = |u_i| / (||U||_F + eps). Every step count from 1 is run, so each
// triple is seen right after it is applied (later steps of a set contract errors away: Polar
// Express's last map has zero slope at 1), and 3 more steps past the end of each table check the
// "repeat the last triple" rule.
TEST(NewtonSchulz, SeparableInputFollowsThePublishedScalarMapPastTheEnd) {
  const std::int64_t s = 16, l = 40;
  std::vector<float> wide(s * l, 0.0f);
  std::vector<std::int64_t> column(s);
  std::vector<double> value(s);
  double norm = 0.0;
  for (std::int64_t i = 0; i < s; ++i) {
    column[i] = (7 * i + 3) % l;                         // distinct: gcd(7, 40) = 1
    value[i] = (i % 2 ? -1.0 : 1.0) * std::pow(1.5, i);  // sigma from ~0.002 to ~0.75
    wide[i * l + column[i]] = static_cast<float>(value[i]);
    norm += value[i] * value[i];
  }
  norm = std::sqrt(norm);
  std::vector<float> tall(wide.size());
  transpose(matrix_view(wide.data(), s, l), matrix_view(tall.data(), l, s));
  for (NsCoefficients set :
       {NsCoefficients::kSimple, NsCoefficients::kQuintic, NsCoefficients::kPolarExpress}) {
    const std::span<const published::Triple> table = published::table(set);
    const int table_size = static_cast<int>(table.size());
    for (int steps = 1; steps <= table_size + 3; ++steps) {
      SCOPED_TRACE(::testing::Message() << to_string(set) << " steps " << steps);
      const NewtonSchulzOptions o{set, steps, 1e-7};
      std::vector<float> out_wide(wide.size()), out_tall(tall.size());
      newton_schulz(matrix_view(wide.data(), s, l), matrix_view(out_wide.data(), s, l), o);
      newton_schulz(matrix_view(tall.data(), l, s), matrix_view(out_tall.data(), l, s), o);
      for (std::int64_t i = 0; i < s; ++i) {
        double x = value[i] / (norm + 1e-7);
        for (int k = 0; k < steps; ++k) {
          const published::Triple& t = published::triple(table, k);
          x = t.a * x + t.b * x * x * x + t.c * x * x * x * x * x;
        }
        for (std::int64_t j = 0; j < l; ++j) {
          const double expected = j == column[i] ? x : 0.0;
          ASSERT_NEAR(out_wide[i * l + j], expected, 2e-5 * std::abs(expected))
              << "wide entry (" << i << ", " << j << ")";
          ASSERT_NEAR(out_tall[j * s + i], expected, 2e-5 * std::abs(expected))
              << "tall entry (" << j << ", " << i << ")";
        }
      }
    }
  }
}

// FLOPs per iteration as muon.h counts them: 4 s^2 l (X X^T and B X) + 2 s^3 (A A); the
// executed count has 3 s^2 l because ssyrk forms one triangle. 512 x 2048, 5 steps, by hand:
// 5 (4 * 2048 * 512^2 + 2 * 512^3) = 5 (2,147,483,648 + 268,435,456) = 12,079,595,520 and
// 5 (3 * 2048 * 512^2 + 2 * 512^3) = 5 (1,610,612,736 + 268,435,456) = 9,395,240,960.
TEST(NewtonSchulz, FlopCountsAreHandComputed) {
  EXPECT_EQ(newton_schulz_flops(512, 2048, 5), 12'079'595'520.0);
  EXPECT_EQ(newton_schulz_flops(2048, 512, 5), 12'079'595'520.0);
  EXPECT_EQ(newton_schulz_executed_flops(512, 2048, 5), 8'724'152'320.0);
  EXPECT_EQ(newton_schulz_flops(7, 7, 0), 0.0);
}

struct BandCase {
  NsCoefficients set;
  int steps;
  double lo, hi;  // image of normalised singular values in [0.01, 1] under the iteration
};

// Output singular values = the scalar iteration applied to the normalised input singular values,
// and all of them inside the set's band, for wide, tall and square matrices.
TEST(NewtonSchulz, SingularValuesFollowScalarMapAndStayInBand) {
  const BandCase cases[] = {{NsCoefficients::kSimple, 5, 0.68, 1.135},
                            {NsCoefficients::kQuintic, 5, 0.977, 1.033},
                            {NsCoefficients::kQuintic, 8, 0.985, 0.992},
                            {NsCoefficients::kPolarExpress, 8, 0.995, 1.005}};
  struct Shape {
    std::int64_t rows, cols;
  };
  const Shape shapes[] = {{64, 128}, {128, 64}, {32, 256}, {256, 32}, {96, 96}};
  std::uint32_t seed = 100;
  for (const Shape& shape : shapes) {
    std::vector<float> g;
    if (shape.rows == shape.cols) {
      // Square Gaussian matrices have near-zero singular values; build one with spectrum [1, 10].
      const std::int64_t n = shape.rows;
      const DMat u = random_orthogonal(n, seed++), v = random_orthogonal(n, seed++);
      DMat s(n, n);
      for (std::int64_t i = 0; i < n; ++i) s(i, i) = 1.0 + 9.0 * i / (n - 1);
      const DMat m = test::matmul(test::matmul(u, s), test::transposed(v));
      g.assign(m.v.begin(), m.v.end());
    } else {
      g = test::random_floats(shape.rows * shape.cols, seed++);
    }
    const std::vector<double> sigma_in = singular_values(g, shape.rows, shape.cols);
    double norm = 0;
    for (float x : g) norm += double(x) * x;
    norm = std::sqrt(norm);
    for (const BandCase& c : cases) {
      SCOPED_TRACE(::testing::Message() << shape.rows << "x" << shape.cols << " "
                                        << to_string(c.set) << " steps " << c.steps);
      NewtonSchulzOptions o{c.set, c.steps, 1e-7};
      std::vector<float> out(g.size());
      newton_schulz(matrix_view(g.data(), shape.rows, shape.cols),
                    matrix_view(out.data(), shape.rows, shape.cols), o);
      std::vector<double> sigma_out = singular_values(out, shape.rows, shape.cols);
      std::vector<double> predicted;
      const auto set = published::table(c.set);
      for (double s : sigma_in) {
        double x = s / (norm + o.eps);
        ASSERT_GE(x, 0.01) << "test matrix is too ill-conditioned for the band";
        for (int i = 0; i < c.steps; ++i) {
          const published::Triple& t = published::triple(set, i);
          x = t.a * x + t.b * x * x * x + t.c * x * x * x * x * x;
        }
        predicted.push_back(x);
      }
      std::sort(predicted.begin(), predicted.end());
      std::sort(sigma_out.begin(), sigma_out.end());
      for (std::size_t i = 0; i < sigma_out.size(); ++i) {
        EXPECT_NEAR(sigma_out[i], predicted[i], 2e-3) << "singular value " << i;
        EXPECT_GE(sigma_out[i], c.lo - 2e-3);
        EXPECT_LE(sigma_out[i], c.hi + 2e-3);
      }
    }
  }
}

TEST(NewtonSchulz, MatchesPlainLoopReference) {
  struct Case {
    std::int64_t rows, cols;
    NsCoefficients set;
    int steps;
  };
  const Case cases[] = {
      {48, 80, NsCoefficients::kSimple, 5},       {80, 48, NsCoefficients::kSimple, 5},
      {64, 64, NsCoefficients::kQuintic, 7},  // past the end of the set
      {37, 91, NsCoefficients::kPolarExpress, 8}, {91, 37, NsCoefficients::kPolarExpress, 10},
      {1, 33, NsCoefficients::kSimple, 5},        {33, 1, NsCoefficients::kQuintic, 3},
      {20, 30, NsCoefficients::kSimple, 0}};
  std::uint32_t seed = 7;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.rows << "x" << c.cols << " " << to_string(c.set) << " steps " << c.steps);
    const std::vector<float> g = test::random_floats(c.rows * c.cols, seed++, 0.01f);
    const NewtonSchulzOptions o{c.set, c.steps, 1e-7};
    std::vector<float> out(g.size());
    newton_schulz(matrix_view(g.data(), c.rows, c.cols), matrix_view(out.data(), c.rows, c.cols),
                  o);
    const DMat ref = test::reference_newton_schulz(test::to_dmat(g, c.rows, c.cols), o);
    EXPECT_LE(test::max_abs_diff(out, ref), 2e-5 * std::max(1.0, test::max_abs(ref)));
  }
}

TEST(NewtonSchulz, TallIsTransposeOfWideBitwise) {
  const std::int64_t rows = 40, cols = 72;
  const std::vector<float> g = test::random_floats(rows * cols, 3);
  std::vector<float> gt(g.size()), wide(g.size()), tall(g.size()), tall_t(g.size());
  transpose(matrix_view(g.data(), rows, cols), matrix_view(gt.data(), cols, rows));
  const NewtonSchulzOptions o;
  newton_schulz(matrix_view(g.data(), rows, cols), matrix_view(wide.data(), rows, cols), o);
  newton_schulz(matrix_view(gt.data(), cols, rows), matrix_view(tall.data(), cols, rows), o);
  transpose(matrix_view(tall.data(), cols, rows), matrix_view(tall_t.data(), rows, cols));
  EXPECT_TRUE(test::same_bits(wide, tall_t));
}

TEST(NewtonSchulz, InPlaceEqualsOutOfPlaceBitwise) {
  std::vector<float> g = test::random_floats(30 * 50, 4);
  std::vector<float> out(g.size());
  const NewtonSchulzOptions o{NsCoefficients::kQuintic, 5, 1e-7};
  newton_schulz(matrix_view(g.data(), 30, 50), matrix_view(out.data(), 30, 50), o);
  newton_schulz(matrix_view(g.data(), 30, 50), matrix_view(g.data(), 30, 50), o);
  EXPECT_TRUE(test::same_bits(g, out));
}

MuonOptions muon_options(bool nesterov, MuonScale scale, double wd) {
  MuonOptions o;
  o.lr = 0.05;
  o.nesterov = nesterov;
  o.scale = scale;
  o.weight_decay = wd;
  return o;
}

// Runs `optimizer` and the double reference on `ref_options` for `steps` random gradients and
// returns max |w - w_ref|.
double run_against_reference(Optimizer& optimizer, const MuonOptions& ref_options, int steps,
                             std::uint32_t seed) {
  const ParamInfo& info = optimizer.param();
  ReferenceMuon ref(info, ref_options);
  std::vector<float> w = test::random_floats(info.numel(), seed++, 0.1f);
  DMat w_ref = test::to_dmat(w, info.rows, info.cols);
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> g = test::random_floats(info.numel(), seed++, 0.01f);
    optimizer.step(matrix_view(w.data(), info.rows, info.cols),
                   matrix_view(g.data(), info.rows, info.cols));
    ref.step(w_ref, test::to_dmat(g, info.rows, info.cols));
  }
  EXPECT_EQ(optimizer.step_count(), steps);
  return test::max_abs_diff(w, w_ref);
}

// The optimizer keeps its defaults for every field a case does not set; the reference has the
// published values there (momentum 0.95, eps 1e-7 and, unless the case sets them, 5 steps of
// the simple triple), so a changed default fails here too.
TEST(Muon, MatchesReferenceOverSeveralSteps) {
  struct Case {
    std::int64_t rows, cols, full_rows, full_cols;
    bool nesterov;
    MuonScale scale;
    double wd;
    std::optional<NsCoefficients> set;
    int steps;  // 0: the default
  };
  const Case cases[] = {
      {24, 40, 0, 0, true, MuonScale::kSpectral, 0.1, std::nullopt, 0},
      {40, 24, 0, 0, false, MuonScale::kSpectral, 0.0, std::nullopt, 0},
      {48, 16, 0, 0, true, MuonScale::kAspect, 0.01, std::nullopt, 0},
      {16, 48, 0, 0, false, MuonScale::kAspect, 0.1, std::nullopt, 0},
      {24, 40, 96, 40, true, MuonScale::kSpectral, 0.1, std::nullopt, 0},  // a piece: full shape
      {32, 20, 0, 0, true, MuonScale::kSpectral, 0.1, NsCoefficients::kQuintic, 5},
      {20, 36, 0, 0, true, MuonScale::kSpectral, 0.1, NsCoefficients::kPolarExpress, 8}};
  std::uint32_t seed = 11;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " nesterov " << c.nesterov);
    auto configure = [&](MuonOptions& o) {
      o.lr = 0.05;
      o.nesterov = c.nesterov;
      o.scale = c.scale;
      o.weight_decay = c.wd;
      if (c.set) o.ns.coefficients = *c.set;
      if (c.steps > 0) o.ns.steps = c.steps;
    };
    MuonOptions options, ref_options = published::muon_options();
    configure(options);
    configure(ref_options);
    Muon muon(ParamInfo{"w", c.rows, c.cols, c.full_rows, c.full_cols}, options);
    EXPECT_LE(run_against_reference(muon, ref_options, 4, seed), 1e-5);
    seed += 5;
  }
}

// Keller Jordan's Muon defaults with the Moonlight/Canzona scale (published.h), on the struct
// and on the registry path with empty options.
TEST(Muon, DefaultsAreThePublishedOnes) {
  {
    SCOPED_TRACE("MuonOptions{}");
    published::expect_same(MuonOptions{}, published::muon_options());
  }
  {
    SCOPED_TRACE("NewtonSchulzOptions{}");
    const NewtonSchulzOptions ns;
    EXPECT_EQ(ns.coefficients, NsCoefficients::kSimple);
    EXPECT_EQ(ns.steps, 5);
    EXPECT_EQ(ns.eps, 1e-7);
  }
  {
    SCOPED_TRACE("create_optimizer(\"muon\", {})");
    const auto opt = create_optimizer("muon", ParamInfo{"w", 4, 6});
    published::expect_same(dynamic_cast<const Muon&>(*opt).options(), published::muon_options());
  }
}

// A default-constructed Muon, and the registry's, step exactly as the published algorithm with
// the published defaults.
TEST(Muon, DefaultStepIsThePublishedAlgorithm) {
  Muon direct(ParamInfo{"w", 20, 44}, MuonOptions{});
  EXPECT_LE(run_against_reference(direct, published::muon_options(), 3, 70), 1e-5);
  const auto registry = create_optimizer("muon", ParamInfo{"w", 44, 20});
  EXPECT_LE(run_against_reference(*registry, published::muon_options(), 3, 80), 1e-5);
}

// docs/references.md: 0.2 sqrt(max(rows, cols)) of the full (un-split-by-TP) shape by default, or
// sqrt(max(1, rows / cols)) (Keller Jordan). A 64 x 100 shard of a 64 x 400 row-parallel weight
// (TP = 4) scales by 0.2 sqrt(400) = 4, not 0.2 sqrt(100) = 2.
TEST(Muon, UpdateScaleConventions) {
  MuonOptions o;
  EXPECT_DOUBLE_EQ(Muon(ParamInfo{"q", 64, 32, 256, 32}, o).update_scale(), 0.2 * 16.0);
  EXPECT_DOUBLE_EQ(Muon(ParamInfo{"w", 64, 100}, o).update_scale(), 0.2 * 10.0);
  EXPECT_DOUBLE_EQ(Muon(ParamInfo{"fc2", 64, 100, 64, 400}, o).update_scale(), 4.0);
  o.scale = MuonScale::kAspect;
  EXPECT_DOUBLE_EQ(Muon(ParamInfo{"w", 64, 32}, o).update_scale(), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(Muon(ParamInfo{"w", 32, 64}, o).update_scale(), 1.0);
  EXPECT_DOUBLE_EQ(Muon(ParamInfo{"fc1", 160, 16}, o).update_scale(), std::sqrt(10.0));
  EXPECT_EQ(parse_muon_scale("spectral"), MuonScale::kSpectral);
  EXPECT_EQ(parse_muon_scale("aspect"), MuonScale::kAspect);
}

TEST(Muon, ZeroGradientOnlyAppliesWeightDecay) {
  const std::int64_t rows = 12, cols = 20;
  Muon muon(ParamInfo{"w", rows, cols}, muon_options(true, MuonScale::kSpectral, 0.1));
  std::vector<float> w = test::random_floats(rows * cols, 5), before = w;
  const std::vector<float> zero(rows * cols, 0.0f);
  muon.step(matrix_view(w.data(), rows, cols), matrix_view(zero.data(), rows, cols));
  const float decay = static_cast<float>(1.0 - 0.05 * 0.1);
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], before[i] * decay) << i;
}

TEST(Muon, TinyGradientTakesEpsPathAndStaysFinite) {
  const std::int64_t rows = 16, cols = 24;
  for (float scale : {1e-30f, 1e-9f, 1e-7f}) {
    SCOPED_TRACE(scale);
    Muon muon(ParamInfo{"w", rows, cols}, muon_options(true, MuonScale::kSpectral, 0.0));
    std::vector<float> w = test::random_floats(rows * cols, 6), before = w;
    const std::vector<float> g = test::random_floats(rows * cols, 7, scale);
    muon.step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
    // ||U|| << eps shrinks X below 1 and NS grows a singular value at most 3.4445^5 ~ 488 times,
    // so the update stays finite and bounded by lr * scale * 488 * ||U|| / eps.
    const double norm_u = scale * std::sqrt(double(rows * cols));
    const double bound = 0.05 * muon.update_scale() * 488.0 * std::min(1.0, norm_u / 1e-7) + 1e-6;
    for (std::size_t i = 0; i < w.size(); ++i) {
      ASSERT_TRUE(std::isfinite(w[i]));
      EXPECT_LE(std::abs(double(w[i]) - before[i]), bound);
    }
  }
}

TEST(Muon, NonFiniteGradientThrowsNamingParamAndLeavesStateUntouched) {
  const std::int64_t rows = 8, cols = 6;
  const MuonOptions o = muon_options(true, MuonScale::kSpectral, 0.1);
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    Muon muon(ParamInfo{"layers.0.attn.q", rows, cols}, o), fresh(ParamInfo{"f", rows, cols}, o);
    std::vector<float> w = test::random_floats(rows * cols, 8), w_fresh = w, before = w;
    std::vector<float> g = test::random_floats(rows * cols, 9);
    std::vector<float> g_bad = g;
    g_bad[3 * cols + 5] = bad;
    try {
      muon.step(matrix_view(w.data(), rows, cols), matrix_view(g_bad.data(), rows, cols));
      FAIL() << "expected canzona::Error";
    } catch (const UsageError&) {
      FAIL() << "a non-finite gradient is not a usage error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("layers.0.attn.q"), std::string::npos) << what;
      EXPECT_NE(what.find("8x6"), std::string::npos) << what;
      EXPECT_NE(what.find("(3, 5)"), std::string::npos) << what;
    }
    EXPECT_TRUE(test::same_bits(w, before));
    EXPECT_EQ(muon.step_count(), 0);
    muon.step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
    fresh.step(matrix_view(w_fresh.data(), rows, cols), matrix_view(g.data(), rows, cols));
    EXPECT_TRUE(test::same_bits(w, w_fresh));
  }
}

TEST(Muon, BitwiseRepeatableAcrossInstancesAndLayouts) {
  const std::int64_t rows = 33, cols = 70, ld = 81;
  const MuonOptions o = muon_options(true, MuonScale::kSpectral, 0.1);
  Muon a(ParamInfo{"w", rows, cols}, o), b(ParamInfo{"w", rows, cols}, o);
  Muon strided(ParamInfo{"w", rows, cols}, o);
  std::vector<float> wa = test::random_floats(rows * cols, 12), wb = wa;
  std::vector<float> ws(rows * ld, -1.0f), gs(rows * ld, 7.0f);
  copy(matrix_view(wa.data(), rows, cols), MatrixView{ws.data(), rows, cols, ld});
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = test::random_floats(rows * cols, 13 + step);
    copy(matrix_view(g.data(), rows, cols), MatrixView{gs.data(), rows, cols, ld});
    a.step(matrix_view(wa.data(), rows, cols), matrix_view(g.data(), rows, cols));
    b.step(matrix_view(wb.data(), rows, cols), matrix_view(g.data(), rows, cols));
    strided.step(MatrixView{ws.data(), rows, cols, ld}, ConstMatrixView(gs.data(), rows, cols, ld));
  }
  EXPECT_TRUE(test::same_bits(wa, wb));
  std::vector<float> ws_packed(rows * cols);
  copy(ConstMatrixView(ws.data(), rows, cols, ld), matrix_view(ws_packed.data(), rows, cols));
  EXPECT_TRUE(test::same_bits(wa, ws_packed));
  for (std::int64_t r = 0; r < rows; ++r)  // padding untouched
    for (std::int64_t c = cols; c < ld; ++c) EXPECT_EQ(ws[r * ld + c], -1.0f);
}

TEST(Muon, RejectsBadOptionsAndShapes) {
  MuonOptions o;
  o.momentum = 1.0;
  EXPECT_THROW(Muon(ParamInfo{"w", 4, 4}, o), UsageError);
  Muon muon(ParamInfo{"w", 4, 4}, MuonOptions{});
  std::vector<float> w(16), g(12);
  EXPECT_THROW(muon.step(matrix_view(w.data(), 4, 4), matrix_view(g.data(), 3, 4)), UsageError);
}

}  // namespace
}  // namespace canzona::optim

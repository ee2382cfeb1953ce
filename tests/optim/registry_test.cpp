// The registry: names, strict JSON options, the published defaults when no option is given, and
// equality with direct construction.
#include "canzona/optim/registry.h"

#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "canzona/optim/adamw.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/optimizer.h"
#include "canzona/optim/shampoo.h"
#include "canzona/optim/soap.h"
#include "published.h"
#include "test_util.h"

namespace canzona::optim {
namespace {

TEST(Registry, ListsTheFourOptimizers) {
  EXPECT_EQ(optimizer_names(), (std::vector<std::string>{"muon", "shampoo", "soap", "adamw"}));
}

// Each descriptor: its shape, a name equal to its instances' name(), and a factorization formula
// exactly for the optimizers that factorize (Shampoo's eigh, SOAP's QR).
TEST(Registry, DescriptorsCarryShapeNameAndFormulas) {
  EXPECT_EQ(optimizer_names(OptimizerShape::kMatrix),
            (std::vector<std::string>{"muon", "shampoo", "soap"}));
  EXPECT_EQ(optimizer_names(OptimizerShape::kElementwise), std::vector<std::string>{"adamw"});
  for (const std::string& name : optimizer_names()) {
    SCOPED_TRACE(name);
    const OptimizerDescriptor& d = find_optimizer(name);
    EXPECT_EQ(std::string(d.name), name);
    EXPECT_EQ(std::string(d.make(ParamInfo{"w", 2, 3}, nlohmann::json::object(), nullptr)->name()),
              name);
    EXPECT_NE(d.flops, nullptr);
    EXPECT_NE(d.state_bytes, nullptr);
    EXPECT_EQ(d.factorization_flops != nullptr, name == "shampoo" || name == "soap");
  }
  try {
    find_optimizer("lion");
    ADD_FAILURE() << "found lion";
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("unknown optimizer 'lion' (known: muon, shampoo, soap, adamw)"),
        std::string::npos)
        << e.what();
  }
}

// The formulas read options like the factory: unknown keys and out-of-range values throw.
TEST(Registry, FormulasRejectBadOptions) {
  EXPECT_THROW(find_optimizer("muon").flops(4, 4, {{"max_precond_dim", 4}}), UsageError);
  EXPECT_THROW(find_optimizer("soap").state_bytes(4, 4, {{"precondition_frequency", 0}}),
               UsageError);
  EXPECT_THROW(find_optimizer("adamw").flops(1, 4, {{"beta2", 1.0}}), UsageError);
  EXPECT_EQ(find_optimizer("muon").flops(4, 4, {{"ns_steps", 0}}), 0.0);
}

TEST(Registry, CreatesEveryOptimizerWithDefaultsAndSteps) {
  for (const std::string& name : optimizer_names()) {
    SCOPED_TRACE(name);
    auto opt = create_optimizer(name, ParamInfo{"w", 6, 10});
    EXPECT_EQ(opt->name(), name);
    EXPECT_GT(opt->state_bytes(), 0u);
    std::vector<float> w = test::random_floats(60, 1);
    const std::vector<float> g = test::random_floats(60, 2);
    for (int t = 0; t < 3; ++t)
      opt->step(matrix_view(w.data(), 6, 10), matrix_view(g.data(), 6, 10));
    EXPECT_EQ(opt->step_count(), 3);
    for (float x : w) ASSERT_TRUE(std::isfinite(x));
  }
}

// An empty object and JSON null both leave every option at its published default.
TEST(Registry, MissingOptionsKeepThePublishedDefaults) {
  for (const nlohmann::json& options : {nlohmann::json::object(), nlohmann::json()}) {
    SCOPED_TRACE(options.dump());
    const ParamInfo p{"w", 4, 6};
    published::expect_same(
        dynamic_cast<const Muon&>(*create_optimizer("muon", p, options)).options(),
        published::muon_options());
    published::expect_same(
        dynamic_cast<const Shampoo&>(*create_optimizer("shampoo", p, options)).options(),
        published::shampoo_options());
    published::expect_same(
        dynamic_cast<const Soap&>(*create_optimizer("soap", p, options)).options(),
        published::soap_options());
    published::expect_same(
        dynamic_cast<const AdamW&>(*create_optimizer("adamw", p, options)).options(),
        published::adamw_options());
  }
}

// effective_options: every documented key with the value the optimizer runs with; the Muon
// defaults are the published ones (typed here from published.h, not read from the code).
TEST(Registry, EffectiveOptionsListEveryKeyWithItsDefault) {
  const nlohmann::json muon = effective_options("muon", nlohmann::json::object());
  const nlohmann::json want = {{"lr", published::kMuonLr},
                               {"momentum", published::kMuonMomentum},
                               {"nesterov", published::kMuonNesterov},
                               {"ns_coefficients", "simple"},
                               {"ns_steps", published::kMuonNsSteps},
                               {"eps", published::kMuonEps},
                               {"ns_dtype", "fp32"},
                               {"ns_algorithm", "standard"},
                               {"scale", "spectral"},
                               {"weight_decay", published::kMuonWeightDecay}};
  EXPECT_EQ(muon, want) << muon.dump();
  EXPECT_EQ(effective_options("shampoo", nullptr).at("grafting"), "adam");
  EXPECT_EQ(effective_options("shampoo", nullptr).size(), 10u);
  EXPECT_EQ(effective_options("soap", nullptr).size(), 9u);
  EXPECT_EQ(effective_options("adamw", nullptr).size(), 5u);
}

// Spelling a default out changes nothing; changing a value changes the result; bad input throws
// exactly as create_optimizer does.
TEST(Registry, EffectiveOptionsAreTheSameHoweverSpelled) {
  const std::string base = effective_options("muon", nlohmann::json::object()).dump();
  EXPECT_EQ(effective_options("muon", {{"ns_steps", 5}}).dump(), base);
  EXPECT_EQ(effective_options("muon", {{"scale", "spectral"}, {"lr", 0.02}}).dump(), base);
  EXPECT_EQ(effective_options("muon", nullptr).dump(), base);
  EXPECT_NE(effective_options("muon", {{"ns_steps", 6}}).dump(), base);
  EXPECT_NE(effective_options("muon", {{"scale", "aspect"}}).dump(), base);
  EXPECT_EQ(effective_options("shampoo", {{"grafting", "sgd"}}).at("grafting"), "sgd");
  EXPECT_THROW(effective_options("muon", {{"ns_stepz", 5}}), UsageError);
  EXPECT_THROW(effective_options("lion", nlohmann::json::object()), UsageError);
}

TEST(Registry, AppliesJsonOptions) {
  auto opt = create_optimizer("muon", ParamInfo{"w", 4, 4},
                              {{"lr", 0.5},
                               {"ns_coefficients", "polar_express"},
                               {"ns_steps", 8},
                               {"nesterov", false},
                               {"scale", "aspect"},
                               {"weight_decay", 0.2},
                               {"momentum", 0.9},
                               {"eps", 1e-6}});
  const auto& o = dynamic_cast<const Muon&>(*opt).options();
  EXPECT_EQ(o.lr, 0.5);
  EXPECT_EQ(o.ns.coefficients, NsCoefficients::kPolarExpress);
  EXPECT_EQ(o.ns.steps, 8);
  EXPECT_FALSE(o.nesterov);
  EXPECT_EQ(o.scale, MuonScale::kAspect);
  auto shampoo = create_optimizer("shampoo", ParamInfo{"w", 4, 4},
                                  {{"grafting", "sgd"}, {"max_precond_dim", 2}});
  EXPECT_EQ(dynamic_cast<const Shampoo&>(*shampoo).options().grafting, Grafting::kSgd);
  EXPECT_FALSE(dynamic_cast<const Shampoo&>(*shampoo).left_preconditioned());
  auto soap = create_optimizer("soap", ParamInfo{"w", 4, 4}, {{"precondition_frequency", 3}});
  EXPECT_EQ(dynamic_cast<const Soap&>(*soap).options().precondition_frequency, 3);
  auto adamw = create_optimizer("adamw", ParamInfo{"w", 1, 4}, {{"beta2", 0.95}});
  EXPECT_EQ(dynamic_cast<const AdamW&>(*adamw).options().beta2, 0.95);
}

TEST(Registry, RejectsUnknownNamesKeysAndTypes) {
  try {
    create_optimizer("lion", ParamInfo{"w", 2, 2});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("muon, shampoo, soap, adamw"), std::string::npos);
  }
  try {
    create_optimizer("muon", ParamInfo{"w", 2, 2}, {{"learning_rate", 0.1}});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'learning_rate'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(create_optimizer("muon", ParamInfo{"w", 2, 2}, {{"ns_steps", 2.5}}), UsageError);
  EXPECT_THROW(create_optimizer("soap", ParamInfo{"w", 2, 2}, {{"correct_bias", 1}}), UsageError);
  EXPECT_THROW(create_optimizer("adamw", ParamInfo{"w", 2, 2}, nlohmann::json::array()),
               UsageError);
}

TEST(Registry, SameBitsAsDirectConstruction) {
  auto from_registry = create_optimizer("muon", ParamInfo{"w", 8, 12}, {{"lr", 0.1}});
  MuonOptions o;
  o.lr = 0.1;
  Muon direct(ParamInfo{"w", 8, 12}, o);
  std::vector<float> a = test::random_floats(96, 3), b = a;
  const std::vector<float> g = test::random_floats(96, 4);
  from_registry->step(matrix_view(a.data(), 8, 12), matrix_view(g.data(), 8, 12));
  direct.step(matrix_view(b.data(), 8, 12), matrix_view(g.data(), 8, 12));
  EXPECT_TRUE(test::same_bits(a, b));
}

}  // namespace
}  // namespace canzona::optim

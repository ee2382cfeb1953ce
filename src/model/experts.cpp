// The expert part of a mixture-of-experts model as one EP rank holds it (Megatron's expert
// buffer; docs/cli.md, "Mixture of experts").
#include <charconv>
#include <string>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/model/spec.h"

namespace canzona::model {

int expert_index(const ParamSpec& param) {
  static const std::string kMarker = "experts.";
  static const std::string kLocal = "local_experts.";
  const std::string& name = param.name;
  for (std::size_t at = name.find(kMarker); at != std::string::npos;
       at = name.find(kMarker, at + 1)) {
    if (at > 0 && name[at - 1] != '.') continue;  // a component that only ends in "experts"
    std::size_t i = at + kMarker.size();
    if (name.compare(i, kLocal.size(), kLocal) == 0) i += kLocal.size();
    const char* begin = name.data() + i;
    const char* end = name.data() + name.size();
    int e = -1;
    const auto [next, error] = std::from_chars(begin, end, e);
    if (error == std::errc() && next != begin && next != end && *next == '.' && e >= 0) return e;
  }
  return -1;
}

bool has_experts(const ModelSpec& model) {
  if (model.arch.num_experts <= 0) return false;
  for (const ParamSpec& p : model.params)
    if (is_expert_param(p)) return true;
  return false;
}

ExpertPart expert_part(const ModelSpec& model, int ep, int etp, int ep_rank) {
  const int experts = model.arch.num_experts;
  CANZONA_REQUIRE(has_experts(model), "--ep/--etp need a mixture-of-experts model (model '",
                  model.name, "' has no experts)");
  CANZONA_REQUIRE(ep >= 1 && etp >= 1, "--ep and --etp must be positive (got --ep ", ep, ", --etp ",
                  etp, ")");
  CANZONA_REQUIRE(experts % ep == 0, "--ep ", ep, " does not divide the ", experts,
                  " experts of model '", model.name, "' (each EP rank holds num_experts / ep)");
  CANZONA_CHECK(ep_rank >= 0 && ep_rank < ep, "EP rank ", ep_rank, " of ", ep);
  const int local = experts / ep;
  ExpertPart part;
  part.model.name = model.name;
  // What planning an expert buffer needs: layers for the stages, the expert counts. Heads and
  // vocabulary belong to the dense part (validate would test them against the expert TP).
  part.model.arch.num_layers = model.arch.num_layers;
  part.model.arch.num_experts = experts;
  part.model.arch.experts_per_token = model.arch.experts_per_token;
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const ParamSpec& p = model.params[i];
    if (!is_expert_param(p)) continue;
    const int e = expert_index(p);
    CANZONA_REQUIRE(e >= 0 && e < experts, "param '", p.name,
                    "': an expert param needs an expert index in [0, ", experts,
                    ") in the name component after 'experts' ('experts.<e>.' or "
                    "'experts.local_experts.<e>.')");
    if (e / local != ep_rank) continue;
    ParamSpec q = p;
    CANZONA_REQUIRE(q.tp_split_dim == -1, "param '", p.name,
                    "': expert params are split by --etp, not --tp (tp_split_dim must be -1)");
    if (etp > 1) {
      const bool fc1 = p.name.ends_with(".linear_fc1.weight");
      const bool fc2 = p.name.ends_with(".linear_fc2.weight");
      CANZONA_REQUIRE((fc1 || fc2) && p.shape.size() == 2, "param '", p.name, "': --etp ", etp,
                      " splits only experts' linear_fc1.weight and linear_fc2.weight matrices");
      // Megatron's expert TP: fc1 column-parallel, its shard t holding [gate_t; up_t] (so the
      // FFN width divides), fc2 row-parallel.
      const std::int64_t ffn = fc1 ? p.shape[0] / 2 : p.shape[1];
      CANZONA_REQUIRE((!fc1 || p.shape[0] % 2 == 0) && ffn % etp == 0, "param '", p.name,
                      "': --etp ", etp, " does not divide its expert FFN width ", ffn);
      q.tp_split_dim = fc1 ? 0 : 1;
      if (fc1 && !q.pieces.empty()) {
        CANZONA_REQUIRE(q.pieces.size() == 2, "param '", p.name,
                        "': --etp splits an expert fc1 into gate and up pieces only");
        const std::int64_t shard = ffn / etp;
        Piece gate{q.pieces[0].name, {}}, up{q.pieces[1].name, {}};
        for (std::int64_t t = 0; t < etp; ++t) {
          gate.row_ranges.emplace_back(2 * t * shard, 2 * t * shard + shard);
          up.row_ranges.emplace_back(2 * t * shard + shard, 2 * (t + 1) * shard);
        }
        q.pieces = {gate, up};
      }
    }
    part.model.params.push_back(std::move(q));
    part.source.push_back(static_cast<int>(i));
  }
  return part;
}

ModelSpec executed_model(const ModelSpec& model, int ep, int etp) {
  ModelSpec out = model;
  for (int k = 0; k < ep; ++k) {
    const ExpertPart part = expert_part(model, ep, etp, k);
    for (std::size_t i = 0; i < part.source.size(); ++i)
      out.params[part.source[i]] = part.model.params[i];
  }
  return out;
}

}  // namespace canzona::model

// A small model that exercises every runtime path: a TP-split element-wise matrix (embedding), a
// fused matrix split on dim 0 whose pieces interleave across TP shards, a dim-1 split matrix, a
// replicated matrix (computed by every TP rank), split and replicated vectors.
#pragma once

#include "canzona/model/spec.h"

namespace canzona::runtime::testing {

// Shapes are divisible by tp in {1, 2, 4}.
inline model::ModelSpec toy_model() {
  using model::OptimizerClass;
  model::ModelSpec m;
  m.name = "toy";
  auto add = [&m](std::string name, std::vector<std::int64_t> shape, int split,
                  OptimizerClass optimizer, std::vector<model::Piece> pieces = {}) {
    model::ParamSpec p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.tp_split_dim = split;
    p.optimizer = optimizer;
    p.pieces = std::move(pieces);
    m.params.push_back(std::move(p));
  };
  add("embedding.word_embeddings.weight", {96, 32}, 0, OptimizerClass::kElementwise);
  add("layer.norm.weight", {32}, -1, OptimizerClass::kElementwise);
  add("layer.qkv.weight", {96, 32}, 0, OptimizerClass::kMatrix,
      {{"q", {{0, 16}, {48, 64}}}, {"k", {{16, 32}, {64, 80}}}, {"v", {{32, 48}, {80, 96}}}});
  add("layer.qkv.bias", {96}, 0, OptimizerClass::kElementwise);
  add("layer.proj.weight", {32, 48}, 1, OptimizerClass::kMatrix);
  add("layer.router.weight", {8, 32}, -1, OptimizerClass::kMatrix);
  add("layer.fc.weight", {64, 32}, 0, OptimizerClass::kMatrix);
  add("final.norm.weight", {32}, -1, OptimizerClass::kElementwise);
  return m;
}

}  // namespace canzona::runtime::testing

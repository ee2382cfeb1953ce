// The optimizer instances the engine creates for what a rank computes, and the ParamInfo they are
// created with. The single-process reference (reference.h) creates its own through the same
// functions, so both sides build identical instances.
#pragma once

#include <cstdint>
#include <memory>

#include "canzona/engine/engine.h"
#include "canzona/model/spec.h"
#include "canzona/optim/optimizer.h"

namespace canzona::engine {

// The ParamInfo of a matrix task (param, piece; -1 = whole) or, with piece = -1 and an
// element-wise param, of the whole param as a 1 x numel slice.
optim::ParamInfo task_info(const model::ParamSpec& param, int piece);

// The optimizer of a matrix task, from options.optimizer and options.optimizer_options.
std::unique_ptr<optim::Optimizer> make_matrix_optimizer(const EngineOptions& options,
                                                        const model::ParamSpec& param, int piece);
// AdamW for `numel` elements of an element-wise param (name suffixed with the slice).
std::unique_ptr<optim::Optimizer> make_elementwise_optimizer(const EngineOptions& options,
                                                             const model::ParamSpec& param,
                                                             std::int64_t begin,
                                                             std::int64_t numel);

}  // namespace canzona::engine

// Sign-SGD, an optimizer that lives entirely in tests/optim/toy_sign_sgd.cpp and joins the
// registry at run time: the proof that adding an optimizer is one file (docs/optimizers.md).
#pragma once

namespace canzona::optim::toy {

inline constexpr const char* kSignSgd = "sign_sgd";

// Registers "sign_sgd" (matrix kind) with optim::register_optimizer; later calls do nothing.
// Call it before any other thread looks optimizers up.
void register_sign_sgd();

}  // namespace canzona::optim::toy

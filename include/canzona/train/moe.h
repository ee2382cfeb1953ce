// Qwen3-MoE's sparse MLP block in libtorch (Hugging Face Qwen3MoeSparseMoeBlock; Megatron's
// MoELayer with its all-to-all token dispatcher, dropless), over an expert-parallel group.
//
// Terms. E experts per MoE layer, each token goes to k of them. An *EP group* of size P: rank p
// holds the local experts [p E/P, (p + 1) E/P) (model::expert_part). Every rank routes its own
// tokens; each (token, choice) *assignment* travels to the rank holding its expert (the
// dispatch All-to-All), is computed there together with the other ranks' assignments of that
// expert, and comes back (the combine All-to-All) to be weighted and summed into its token. Both
// All-to-Alls are custom autograd functions whose backward is the reverse All-to-All, so the
// gradient of an expert's weights sums over every token any rank sent it. An expert no token
// reached is still multiplied by an empty matrix, so its weight gradient is an exact zero of its
// full shape (its optimizer update is the defined one for a zero gradient).
#pragma once
#include <torch/torch.h>

#include <vector>

#include "canzona/comm/communicator.h"

namespace canzona::train {

struct EpGroup {
  comm::Communicator* comm = nullptr;  // borrowed; may be null when size == 1
  int size = 1;
  int rank = 0;
};

// The router's choice for N tokens, as Hugging Face's Qwen3-MoE makes it: probs = softmax of the
// router logits x W_r^T in fp32; each token's k largest probabilities, in descending order, ties
// to the lower expert index (a stable sort: deterministic on every rank and run); their
// probabilities as weights, divided by their sum when norm_topk_prob.
struct Routing {
  torch::Tensor probs;    // [N, E], autograd-connected to the router weight and x
  torch::Tensor experts;  // [N, k] int64
  torch::Tensor weights;  // [N, k], autograd-connected
};
// x [N, h]; router_weight [E, h]. Throws canzona::Error unless 1 <= k <= E.
Routing route(const torch::Tensor& x, const torch::Tensor& router_weight, int k,
              bool norm_topk_prob);

// Hugging Face's load_balancing_loss_func over the MoE layers' routings, their tokens
// concatenated: E x sum_e F_e P_e, where F_e is the number of choices of expert e over all
// tokens and their k slots divided by the token count, and P_e the mean of probs[:, e]. The
// gradient flows through P only. A scalar; multiply by router_aux_loss_coef.
torch::Tensor load_balancing_loss(const std::vector<Routing>& layers, int num_experts);

// Pipeline stages: the MoE layers of one stage, their tokens concatenated: the router
// probabilities [rows, E] (autograd-connected) and each expert's count of choices [E] (fp32,
// whole numbers, detached); undefined tensors for no layer.
struct StageRouting {
  torch::Tensor probs;
  torch::Tensor counts;
};
StageRouting stage_routing(const std::vector<Routing>& layers, int num_experts);
// One stage's share of load_balancing_loss: E x sum_e choices_e x (its probs' column sums /
// rows), where choices = every stage's counts summed / rows and rows counts every stage's. The
// shares add up to the loss (to rounding), and each share's gradient is the loss's gradient of
// its rows bit for bit (load_balancing_loss's own operations, the mean's division included).
torch::Tensor load_balancing_share(const torch::Tensor& probs, const torch::Tensor& choices,
                                   std::int64_t rows, int num_experts);

// The experts' output for this rank's tokens: out[n] = sum_j weights[n, j] x
// expert_{experts[n, j]}(x[n]), expert_e(v) = fc2_e (silu(gate_e v) * up_e v) with fc1_e =
// [gate_e; up_e] ([2 f, h]) and fc2_e [h, f]. fc1 and fc2 hold this EP rank's E / ep.size experts
// in order. x [N, h] -> [N, h]. Collective over ep.comm when ep.size > 1 (two All-to-Alls of
// counts and two of rows in the forward, two of rows in the backward). Contributions to a token
// are added in ascending expert order.
torch::Tensor moe_experts(const torch::Tensor& x, const Routing& routing,
                          const std::vector<torch::Tensor>& fc1,
                          const std::vector<torch::Tensor>& fc2, int num_experts,
                          const EpGroup& ep);

}  // namespace canzona::train

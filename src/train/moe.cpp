// Qwen3-MoE's sparse MLP block over an EP group (moe.h).
#include "canzona/train/moe.h"

#include <cstdint>
#include <span>

#include "canzona/common/error.h"
#include "canzona/train/tp_layers.h"

namespace canzona::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<std::int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kInt64).contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

std::vector<std::int64_t> displacements(const std::vector<std::int64_t>& counts) {
  std::vector<std::int64_t> displs(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

// Rows of width `width`: send_rows[r] rows to rank r, recv_rows[r] rows from it.
torch::Tensor exchange_rows(const torch::Tensor& in, const std::vector<std::int64_t>& send_rows,
                            const std::vector<std::int64_t>& recv_rows, std::int64_t width,
                            comm::Communicator& comm) {
  const torch::Tensor send = in.contiguous();
  std::int64_t total = 0;
  for (std::int64_t r : recv_rows) total += r;
  torch::Tensor recv = torch::empty({total, width}, send.options());
  std::vector<std::int64_t> send_counts, recv_counts;
  for (std::int64_t r : send_rows) send_counts.push_back(r * width);
  for (std::int64_t r : recv_rows) recv_counts.push_back(r * width);
  comm.all_to_all(typed_span(send), send_counts, displacements(send_counts), typed_span(recv),
                  recv_counts, displacements(recv_counts))
      .wait();
  return recv;
}

// The dispatch (and, with the counts swapped, the combine) All-to-All as an autograd function.
struct AllToAllRows : torch::autograd::Function<AllToAllRows> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               std::vector<std::int64_t> send_rows,
                               std::vector<std::int64_t> recv_rows, EpGroup ep) {
    ctx->saved_data["send"] = send_rows;
    ctx->saved_data["recv"] = recv_rows;
    ctx->saved_data["comm"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(ep.comm));
    return exchange_rows(x, send_rows, recv_rows, x.size(1), *ep.comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* comm = reinterpret_cast<comm::Communicator*>(
        static_cast<std::intptr_t>(ctx->saved_data["comm"].toInt()));
    const std::vector<std::int64_t> send = ctx->saved_data["send"].toIntVector();
    const std::vector<std::int64_t> recv = ctx->saved_data["recv"].toIntVector();
    return {exchange_rows(grads[0], recv, send, grads[0].size(1), *comm), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

Routing route(const torch::Tensor& x, const torch::Tensor& router_weight, int k,
              bool norm_topk_prob) {
  const std::int64_t experts = router_weight.size(0);
  CANZONA_CHECK(k >= 1 && k <= experts, "top-", k, " of ", experts, " experts");
  Routing r;
  r.probs = torch::softmax(torch::matmul(x, router_weight.t()), 1, torch::kFloat);
  // A stable descending sort keeps equal probabilities in ascending expert order.
  const auto sorted = r.probs.detach().sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
  r.experts = std::get<1>(sorted).slice(1, 0, k).contiguous();
  r.weights = r.probs.gather(1, r.experts);
  if (norm_topk_prob) r.weights = r.weights / r.weights.sum(1, /*keepdim=*/true);
  return r;
}

torch::Tensor load_balancing_loss(const std::vector<Routing>& layers, int num_experts) {
  CANZONA_CHECK(!layers.empty(), "load_balancing_loss of no layer");
  std::vector<torch::Tensor> probs, chosen;
  for (const Routing& r : layers) {
    probs.push_back(r.probs);
    chosen.push_back(r.experts);
  }
  const torch::Tensor p = torch::cat(probs, 0);
  const torch::Tensor e = torch::cat(chosen, 0);
  const double tokens = static_cast<double>(p.size(0));
  const torch::Tensor choices =
      torch::one_hot(e, num_experts).to(torch::kFloat).sum(at::IntArrayRef{0, 1}) / tokens;  // [E]
  return static_cast<double>(num_experts) * (choices * p.mean(0)).sum();
}

StageRouting stage_routing(const std::vector<Routing>& layers, int num_experts) {
  if (layers.empty()) return {};
  std::vector<torch::Tensor> probs, chosen;
  for (const Routing& r : layers) {
    probs.push_back(r.probs);
    chosen.push_back(r.experts);
  }
  return {torch::cat(probs, 0), torch::one_hot(torch::cat(chosen, 0), num_experts)
                                    .to(torch::kFloat)
                                    .sum(at::IntArrayRef{0, 1})
                                    .detach()};
}

torch::Tensor load_balancing_share(const torch::Tensor& probs, const torch::Tensor& choices,
                                   std::int64_t rows, int num_experts) {
  return static_cast<double>(num_experts) *
         (choices * (probs.sum(0) / static_cast<double>(rows))).sum();
}

torch::Tensor moe_experts(const torch::Tensor& x, const Routing& routing,
                          const std::vector<torch::Tensor>& fc1,
                          const std::vector<torch::Tensor>& fc2, int num_experts,
                          const EpGroup& ep) {
  const int local = static_cast<int>(fc1.size());
  CANZONA_CHECK(ep.size >= 1 && local * ep.size == num_experts && fc2.size() == fc1.size(), "EP ",
                ep.size, " x ", local, " local experts != ", num_experts);
  CANZONA_CHECK(ep.size == 1 || ep.comm != nullptr, "EP group without a communicator");
  const std::int64_t n = x.size(0), h = x.size(1), k = routing.experts.size(1);
  // Assignments a = n k + j, ordered by expert (so by destination EP rank), then by a.
  const torch::Tensor flat = routing.experts.reshape({-1});
  const torch::Tensor order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
  const torch::Tensor token = torch::div(order, k, "floor");
  const torch::Tensor weight = routing.weights.reshape({-1}).index_select(0, order);
  const torch::Tensor sent = x.index_select(0, token);  // [n k, h]
  // counts[d][l]: assignments to expert d x local + l.
  const std::vector<std::int64_t> counts = to_vector(torch::bincount(flat, {}, num_experts));
  std::vector<std::int64_t> send_rows(ep.size, 0);
  for (int e = 0; e < num_experts; ++e) send_rows[e / local] += counts[e];
  // from[s][l]: rows of local expert l that rank s sends here.
  std::vector<std::int64_t> from(static_cast<std::size_t>(ep.size) * local, 0);
  torch::Tensor received = sent;
  if (ep.size > 1) {
    std::vector<float> mine(counts.begin(), counts.end()), theirs(from.size());
    const std::vector<std::int64_t> blocks(ep.size, local);
    ep.comm->all_to_all(mine, blocks, displacements(blocks), theirs, blocks, displacements(blocks))
        .wait();
    for (std::size_t i = 0; i < from.size(); ++i) from[i] = static_cast<std::int64_t>(theirs[i]);
    std::vector<std::int64_t> recv_rows(ep.size, 0);
    for (int s = 0; s < ep.size; ++s)
      for (int l = 0; l < local; ++l) recv_rows[s] += from[s * local + l];
    received = AllToAllRows::apply(sent, send_rows, recv_rows, ep);
  } else {
    from = counts;
  }
  // Received rows come by source rank, each source's by local expert: regroup them by expert
  // (sources in rank order), run each expert on its rows, and put the outputs back.
  std::vector<std::int64_t> offset(from.size(), 0);  // of (s, l) in `received`
  std::int64_t at = 0;
  for (std::size_t i = 0; i < from.size(); ++i) {
    offset[i] = at;
    at += from[i];
  }
  std::vector<std::int64_t> perm;
  perm.reserve(static_cast<std::size_t>(at));
  std::vector<std::int64_t> rows_of(local, 0);
  for (int l = 0; l < local; ++l)
    for (int s = 0; s < ep.size; ++s) {
      const std::size_t i = static_cast<std::size_t>(s) * local + l;
      for (std::int64_t r = 0; r < from[i]; ++r) perm.push_back(offset[i] + r);
      rows_of[l] += from[i];
    }
  const torch::Tensor perm_t = torch::tensor(perm, torch::kInt64);
  const torch::Tensor grouped = received.index_select(0, perm_t);
  std::vector<torch::Tensor> outputs;
  std::int64_t begin = 0;
  for (int l = 0; l < local; ++l) {
    const torch::Tensor rows = grouped.slice(0, begin, begin + rows_of[l]);
    begin += rows_of[l];
    const torch::Tensor both = torch::matmul(rows, fc1[l].t());  // [m, 2 f]
    const std::int64_t f = both.size(1) / 2;
    const torch::Tensor act = torch::silu(both.slice(1, 0, f)) * both.slice(1, f, 2 * f);
    outputs.push_back(torch::matmul(act, fc2[l].t()));  // [m, h]
  }
  const torch::Tensor computed =
      outputs.empty() ? grouped : torch::cat(outputs, 0).index_select(0, torch::argsort(perm_t));
  torch::Tensor back = computed;
  if (ep.size > 1) {
    std::vector<std::int64_t> recv_rows(ep.size, 0);
    for (int s = 0; s < ep.size; ++s)
      for (int l = 0; l < local; ++l) recv_rows[s] += from[s * local + l];
    back = AllToAllRows::apply(computed, recv_rows, send_rows, ep);
  }
  // bf16: the routing weights are rounded to the activations' dtype first, as Hugging Face's
  // Qwen3-MoE block does (routing_weights.to(hidden_states.dtype)).
  return torch::zeros({n, h}, x.options())
      .index_add(0, token, back * weight.to(x.scalar_type()).unsqueeze(1));
}

}  // namespace canzona::train

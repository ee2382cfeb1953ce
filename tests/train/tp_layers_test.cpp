// The tensor-parallel building blocks (tp_layers.h) against a single process.
//
// Each TP test runs T = 2 and T = 4 ranks as threads of this process
// (include/canzona/comm/thread.h, ReduceMode::kDeterministic). The reference is the un-split op on
// the whole weight, written here with plain libtorch ops; rank t's output, input gradient and
// weight-shard gradient must equal the reference's, sliced as rank t holds them. Inputs and
// upstream gradients are drawn in the main thread from fixed seeds; ranks only read them and report
// results back for checking here.
//
// Tolerance (fp32). Splitting a layer changes only the order in which a dot product or a sum is
// accumulated (T partial sums added by the communicator instead of one BLAS sum), so the TP and
// reference values differ by rounding: a few ulps of the largest term per accumulated element.
// With at most 16-term sums of O(1) values that is ~1e-7 of the reference's largest magnitude
// (its value scale; 2.4e-7 observed at worst), so the bound 1e-5 of the scale leaves a 40x
// margin, while every bug the tests target (a missing collective, a wrong max, an unmasked row)
// moves values by O(scale). Where the arithmetic is the same op for op, the checks
// are bitwise: TP size 1 against the plain op, the collectives against a hand rank-order sum, and
// the embedding forward (one shard's row plus exact zeros).
#include "canzona/train/tp_layers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/comm/thread.h"

namespace canzona::train {
namespace {

constexpr double kRelTolerance = 1e-5;  // max abs diff / value scale, see the file comment

// Runs body(tp) on `size` threads, rank t with TP group {comm, size, t}.
void run_tp(int size, const std::function<void(const TpGroup&)>& body) {
  comm::run_on_thread_grid({1, size, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& grid) {
    const TpGroup tp{&grid.tp(), size, grid.tp().rank()};
    body(tp);
  });
}

bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

// Max abs difference of got and want, in units of want's value scale max(1, max |want|).
double scaled_diff(const torch::Tensor& got, const torch::Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  if (got.sizes() != want.sizes()) return 1e30;
  const double scale = std::max(1.0, want.abs().max().item<double>());
  return (got - want).abs().max().item<double>() / scale;
}

// Slice t of T along `dim`.
torch::Tensor shard(const torch::Tensor& full, std::int64_t dim, int size, int t) {
  const std::int64_t n = full.size(dim) / size;
  return full.narrow(dim, t * n, n).contiguous();
}

torch::Tensor leaf(const torch::Tensor& t) {
  return t.detach().clone().set_requires_grad(true);
}

// What one rank reports: its forward output and the gradients of its leaves.
struct RankResult {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

class TpLayers : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(TpLayers, CopyToTpForwardIsInputBackwardIsRankOrderSum) {
  const int size = GetParam();
  torch::manual_seed(11);
  const torch::Tensor x = torch::randn({3, 5});
  std::vector<torch::Tensor> upstream;
  for (int t = 0; t < size; ++t) upstream.push_back(torch::randn({3, 5}));
  std::vector<RankResult> results(size);
  run_tp(size, [&](const TpGroup& tp) {
    torch::Tensor input = leaf(x);
    torch::Tensor y = copy_to_tp(input, tp);
    y.backward(upstream[tp.rank]);
    results[tp.rank] = {y.detach(), {input.grad()}};
  });
  // kDeterministic: ((g_0 + g_1) + g_2) + ... on every rank.
  torch::Tensor sum = upstream[0].clone();
  for (int t = 1; t < size; ++t) sum = sum + upstream[t];
  for (int t = 0; t < size; ++t) {
    EXPECT_TRUE(bitwise_equal(results[t].out, x)) << "rank " << t;
    EXPECT_TRUE(bitwise_equal(results[t].grads[0], sum)) << "rank " << t;
  }
}

TEST_P(TpLayers, ReduceFromTpForwardIsRankOrderSumBackwardIsIdentity) {
  const int size = GetParam();
  torch::manual_seed(12);
  std::vector<torch::Tensor> xs, upstream;
  for (int t = 0; t < size; ++t) {
    xs.push_back(torch::randn({4, 3}));
    upstream.push_back(torch::randn({4, 3}));
  }
  std::vector<RankResult> results(size);
  run_tp(size, [&](const TpGroup& tp) {
    torch::Tensor input = leaf(xs[tp.rank]);
    torch::Tensor y = reduce_from_tp(input, tp);
    y.backward(upstream[tp.rank]);
    results[tp.rank] = {y.detach(), {input.grad()}};
  });
  torch::Tensor sum = xs[0].clone();
  for (int t = 1; t < size; ++t) sum = sum + xs[t];
  for (int t = 0; t < size; ++t) {
    EXPECT_TRUE(bitwise_equal(results[t].out, sum)) << "rank " << t;
    EXPECT_TRUE(bitwise_equal(results[t].grads[0], upstream[t])) << "rank " << t;
  }
}

// x [2, 3, in] replicated, W [out, in] split on dim 0, bias [out]; loss sum(y * G).
void check_column_parallel(int size, bool with_bias) {
  const std::int64_t in = 8, out = 16;
  torch::manual_seed(with_bias ? 21 : 22);
  const torch::Tensor x = torch::randn({2, 3, in});
  const torch::Tensor w = torch::randn({out, in});
  const torch::Tensor b = with_bias ? torch::randn({out}) : torch::Tensor();
  const torch::Tensor g = torch::randn({2, 3, out});

  torch::Tensor rx = leaf(x), rw = leaf(w), rb = with_bias ? leaf(b) : torch::Tensor();
  const torch::Tensor ry = torch::matmul(rx, rw.t()) + (with_bias ? rb : torch::zeros({out}));
  (ry * g).sum().backward();

  std::vector<RankResult> results(size);
  run_tp(size, [&](const TpGroup& tp) {
    torch::Tensor lx = leaf(x), lw = leaf(shard(w, 0, size, tp.rank));
    torch::Tensor lb = with_bias ? leaf(shard(b, 0, size, tp.rank)) : torch::Tensor();
    torch::Tensor y = column_parallel_linear(lx, lw, lb, tp);
    (y * shard(g, 2, size, tp.rank)).sum().backward();
    results[tp.rank] = {y.detach(), {lx.grad(), lw.grad()}};
    if (with_bias) results[tp.rank].grads.push_back(lb.grad());
  });
  for (int t = 0; t < size; ++t) {
    SCOPED_TRACE("rank " + std::to_string(t));
    EXPECT_LE(scaled_diff(results[t].out, shard(ry.detach(), 2, size, t)), kRelTolerance);
    EXPECT_LE(scaled_diff(results[t].grads[0], rx.grad()), kRelTolerance);
    EXPECT_LE(scaled_diff(results[t].grads[1], shard(rw.grad(), 0, size, t)), kRelTolerance);
    if (with_bias) {
      EXPECT_LE(scaled_diff(results[t].grads[2], shard(rb.grad(), 0, size, t)), kRelTolerance);
    }
  }
}

TEST_P(TpLayers, ColumnParallelLinearMatchesUnsplitWithBias) {
  check_column_parallel(GetParam(), true);
}

TEST_P(TpLayers, ColumnParallelLinearMatchesUnsplitWithoutBias) {
  check_column_parallel(GetParam(), false);
}

TEST_P(TpLayers, RowParallelLinearMatchesUnsplit) {
  const int size = GetParam();
  const std::int64_t in = 16, out = 8;
  torch::manual_seed(31);
  const torch::Tensor x = torch::randn({2, 3, in});
  const torch::Tensor w = torch::randn({out, in});
  const torch::Tensor g = torch::randn({2, 3, out});  // replicated output, same upstream

  torch::Tensor rx = leaf(x), rw = leaf(w);
  const torch::Tensor ry = torch::matmul(rx, rw.t());
  (ry * g).sum().backward();

  std::vector<RankResult> results(size);
  run_tp(size, [&](const TpGroup& tp) {
    torch::Tensor lx = leaf(shard(x, 2, size, tp.rank)), lw = leaf(shard(w, 1, size, tp.rank));
    torch::Tensor y = row_parallel_linear(lx, lw, tp);
    (y * g).sum().backward();
    results[tp.rank] = {y.detach(), {lx.grad(), lw.grad()}};
  });
  for (int t = 0; t < size; ++t) {
    SCOPED_TRACE("rank " + std::to_string(t));
    EXPECT_LE(scaled_diff(results[t].out, ry.detach()), kRelTolerance);
    EXPECT_LE(scaled_diff(results[t].grads[0], shard(rx.grad(), 2, size, t)), kRelTolerance);
    EXPECT_LE(scaled_diff(results[t].grads[1], shard(rw.grad(), 1, size, t)), kRelTolerance);
  }
  // The replicated output carries identical bits on every rank.
  for (int t = 1; t < size; ++t) EXPECT_TRUE(bitwise_equal(results[t].out, results[0].out));
}

// Ids [2, 16] over a vocabulary of 16: row 0 every id once in order (so every shard boundary
// t V/T - 1, t V/T appears), row 1 a fixed permutation with repeats, so rows of the embedding
// gradient accumulate more than one token.
torch::Tensor embedding_ids() {
  std::vector<std::int64_t> ids;
  for (std::int64_t v = 0; v < 16; ++v) ids.push_back(v);
  for (std::int64_t v : {15, 4, 8, 3, 12, 0, 7, 11, 4, 4, 15, 0, 8, 7, 1, 13}) ids.push_back(v);
  return torch::tensor(ids, torch::kInt64).view({2, 16});
}

TEST_P(TpLayers, VocabParallelEmbeddingMatchesUnsplit) {
  const int size = GetParam();
  const std::int64_t vocab = 16, h = 6;
  torch::manual_seed(41);
  const torch::Tensor e = torch::randn({vocab, h});
  const torch::Tensor g = torch::randn({2, 16, h});
  const torch::Tensor ids = embedding_ids();

  torch::Tensor re = leaf(e);
  const torch::Tensor ry = re.index_select(0, ids.flatten()).view({2, 16, h});
  (ry * g).sum().backward();

  std::vector<RankResult> results(size);
  run_tp(size, [&](const TpGroup& tp) {
    torch::Tensor le = leaf(shard(e, 0, size, tp.rank));
    torch::Tensor y = vocab_parallel_embedding(ids, le, tp.rank * (vocab / size), tp);
    (y * g).sum().backward();
    results[tp.rank] = {y.detach(), {le.grad()}};
  });
  for (int t = 0; t < size; ++t) {
    SCOPED_TRACE("rank " + std::to_string(t));
    // Each output row is one shard's row plus exact zeros from the others: bitwise.
    EXPECT_TRUE(bitwise_equal(results[t].out, ry.detach()));
    EXPECT_LE(scaled_diff(results[t].grads[0], shard(re.grad(), 0, size, t)), kRelTolerance);
  }
}

// Logits [12, 16] at scale 3 (so the ranks' local maxima differ clearly), one row with a
// dominant logit; targets in every shard, at every shard boundary for T = 2 and 4.
TEST_P(TpLayers, VocabParallelCrossEntropyMatchesTorch) {
  const int size = GetParam();
  const std::int64_t n = 12, vocab = 16;
  torch::manual_seed(51);
  torch::Tensor logits = 3.0 * torch::randn({n, vocab});
  logits.index_put_({5, 13}, 40.0);
  const torch::Tensor targets =
      torch::tensor({0, 3, 4, 7, 8, 11, 12, 15, 1, 13, 13, 6}, torch::kInt64);
  const torch::Tensor g = torch::randn({n});

  torch::Tensor rl = leaf(logits);
  const torch::Tensor rloss = torch::nn::functional::cross_entropy(
      rl, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  rloss.backward(g);

  std::vector<RankResult> results(size);
  run_tp(size, [&](const TpGroup& tp) {
    torch::Tensor ll = leaf(shard(logits, 1, size, tp.rank));
    torch::Tensor loss = vocab_parallel_cross_entropy(ll, targets, tp.rank * (vocab / size), tp);
    loss.backward(g);
    results[tp.rank] = {loss.detach(), {ll.grad()}};
  });
  for (int t = 0; t < size; ++t) {
    SCOPED_TRACE("rank " + std::to_string(t));
    EXPECT_LE(scaled_diff(results[t].out, rloss.detach()), kRelTolerance);
    EXPECT_LE(scaled_diff(results[t].grads[0], shard(rl.grad(), 1, size, t)), kRelTolerance);
    EXPECT_TRUE(bitwise_equal(results[t].out, results[0].out));  // identical on every rank
  }
}

INSTANTIATE_TEST_SUITE_P(TpSizes, TpLayers, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "Tp" + std::to_string(info.param);
                         });

// TP size 1 without a communicator: the blocks are the plain ops, bit for bit, both ways.
TEST(TpLayersSingle, Tp1BlocksEqualPlainOpsBitwise) {
  torch::set_num_threads(1);
  torch::manual_seed(61);
  const TpGroup tp;  // size 1, no communicator
  const torch::Tensor x = torch::randn({2, 3, 8}), w = torch::randn({5, 8}), b = torch::randn({5});
  const torch::Tensor g = torch::randn({2, 3, 5});
  for (bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "column with bias" : "column without bias");
    torch::Tensor px = leaf(x), pw = leaf(w), pb = leaf(b);
    torch::Tensor want = torch::nn::functional::linear(px, pw, with_bias ? pb : torch::Tensor());
    (want * g).sum().backward();
    torch::Tensor cx = leaf(x), cw = leaf(w), cb = leaf(b);
    torch::Tensor got = column_parallel_linear(cx, cw, with_bias ? cb : torch::Tensor(), tp);
    (got * g).sum().backward();
    EXPECT_TRUE(bitwise_equal(got, want));
    EXPECT_TRUE(bitwise_equal(cx.grad(), px.grad()));
    EXPECT_TRUE(bitwise_equal(cw.grad(), pw.grad()));
    if (with_bias) {
      EXPECT_TRUE(bitwise_equal(cb.grad(), pb.grad()));
    }
  }
  {
    SCOPED_TRACE("row");
    torch::Tensor px = leaf(x), pw = leaf(w);
    torch::Tensor want = torch::nn::functional::linear(px, pw);
    (want * g).sum().backward();
    torch::Tensor rx = leaf(x), rw = leaf(w);
    torch::Tensor got = row_parallel_linear(rx, rw, tp);
    (got * g).sum().backward();
    EXPECT_TRUE(bitwise_equal(got, want));
    EXPECT_TRUE(bitwise_equal(rx.grad(), px.grad()));
    EXPECT_TRUE(bitwise_equal(rw.grad(), pw.grad()));
  }
  {
    SCOPED_TRACE("embedding");
    const torch::Tensor e = torch::randn({16, 6}), ids = embedding_ids();
    const torch::Tensor ge = torch::randn({2, 16, 6});
    torch::Tensor pe = leaf(e);
    torch::Tensor want = torch::embedding(pe, ids);
    (want * ge).sum().backward();
    torch::Tensor ve = leaf(e);
    torch::Tensor got = vocab_parallel_embedding(ids, ve, 0, tp);
    (got * ge).sum().backward();
    EXPECT_TRUE(bitwise_equal(got, want));
    EXPECT_TRUE(bitwise_equal(ve.grad(), pe.grad()));
  }
  {
    SCOPED_TRACE("collectives");
    torch::Tensor cx = leaf(x);
    EXPECT_TRUE(bitwise_equal(copy_to_tp(cx, tp), x));
    EXPECT_TRUE(bitwise_equal(reduce_from_tp(cx, tp), x));
  }
}

// The cross-entropy at TP size 1 is not the same op sequence as torch's (it subtracts the max and
// sums exponentials itself), so it gets the rounding tolerance of the file comment.
TEST(TpLayersSingle, Tp1CrossEntropyMatchesTorch) {
  torch::set_num_threads(1);
  torch::manual_seed(62);
  const torch::Tensor logits = 3.0 * torch::randn({10, 16});
  const torch::Tensor targets = torch::randint(0, 16, {10}, torch::kInt64);
  const torch::Tensor g = torch::randn({10});
  torch::Tensor rl = leaf(logits);
  const torch::Tensor want = torch::nn::functional::cross_entropy(
      rl, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  want.backward(g);
  torch::Tensor cl = leaf(logits);
  const torch::Tensor got = vocab_parallel_cross_entropy(cl, targets, 0, TpGroup{});
  got.backward(g);
  EXPECT_LE(scaled_diff(got.detach(), want.detach()), kRelTolerance);
  EXPECT_LE(scaled_diff(cl.grad(), rl.grad()), kRelTolerance);
}

}  // namespace
}  // namespace canzona::train

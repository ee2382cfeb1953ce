"""A user's own mixture-of-experts block under expert parallelism (EP): the router's choice, the
dropless token dispatch and combine over the EP group (Megatron's MoELayer with its all-to-all
token dispatcher), and the load-balancing loss; the algorithm of `canzona train`'s Qwen3-MoE
block (include/canzona/train/moe.h), written here in torch.

    import canzona.torch as ct
    ct.parallel.init(ep=2)                       # before the model: each EP rank makes its experts
    class MoE(torch.nn.Module):
        def __init__(self, hidden, ffn, num_experts, top_k):
            super().__init__()
            self.num_experts, self.top_k = num_experts, top_k
            self.router = torch.nn.Linear(hidden, num_experts, bias=False)
            local = num_experts // ct.parallel.ep_size()      # this EP rank's experts
            self.experts = torch.nn.ModuleList(Expert(hidden, ffn) for _ in range(local))
            ct.moe.mark_experts(self.experts)                 # param.allreduce = False
        def forward(self, x):                                 # x [tokens, hidden]
            routing = ct.moe.route(x, self.router.weight, self.top_k)
            return ct.moe.experts_forward(x, routing, self.experts, self.num_experts)

EP rank r holds experts [r E/ep, (r + 1) E/ep) (E = num_experts) as its local experts 0, 1, ...:
name them `...experts.<i>....` with i the local index (DistributedOptimizer names expert
r E/ep + i in its plan and checkpoints). Every rank routes its own tokens; each (token, choice)
goes to the EP rank holding its expert (the dispatch All-to-All), is computed there with every
other rank's tokens for that expert, and comes back (the combine All-to-All) to be weighted and
summed into its token, contributions in ascending expert order. Both All-to-Alls are autograd
functions whose backward is the reverse All-to-All, so an expert's weight gradient sums over every
token any rank sent it. An expert no token reached still runs on zero rows, so its gradient is a
zero of its full shape and every rank of its expert DP group posts the same buckets.
"""
import collections
import json

import torch

from canzona.torch import parallel

Routing = collections.namedtuple("Routing", ["probs", "experts", "weights"])
Routing.__doc__ = """The router's choice for N tokens: probs [N, E] (softmax in fp32, autograd-
connected), experts [N, k] int64 (descending probability, ties to the lower expert), weights
[N, k] (autograd-connected; divided by their sum when norm_topk_prob)."""


def mark_experts(module):
    """Marks every param of `module` as an expert param (Megatron's `param.allreduce = False`), so
    DistributedOptimizer gives it to the expert engine. Returns the module."""
    for p in module.parameters():
        p.allreduce = False
    return module


def route(x, router_weight, k, norm_topk_prob=True):
    """Hugging Face Qwen3-MoE's routing: probs = softmax(x @ router_weight.T) in fp32, each token's
    k most probable experts (a stable sort: ties to the lower index, the same on every rank) and
    their probabilities as weights. x [N, h]; router_weight [E, h]."""
    if x.dim() != 2 or router_weight.dim() != 2 or x.shape[1] != router_weight.shape[1]:
        raise ValueError(f"canzona.torch.moe.route: x must be [N, h] and router_weight [E, h] "
                         f"(got {tuple(x.shape)} and {tuple(router_weight.shape)})")
    experts = router_weight.shape[0]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= experts:
        raise ValueError(f"canzona.torch.moe.route: k must be an int in [1, {experts}] (got "
                         f"{k!r})")
    probs = torch.softmax(x @ router_weight.t(), dim=1, dtype=torch.float32)
    chosen = probs.detach().sort(dim=1, descending=True, stable=True)[1][:, :k].contiguous()
    weights = probs.gather(1, chosen)
    if norm_topk_prob:
        weights = weights / weights.sum(1, keepdim=True)
    return Routing(probs, chosen, weights)


def load_balancing_loss(routings, num_experts):
    """Hugging Face's load_balancing_loss_func over the MoE layers' routings (their tokens
    concatenated): E * sum_e F_e P_e, F_e the share of all choices that went to expert e and P_e
    the mean of probs[:, e]; the gradient flows through P only. Multiply by the aux coefficient."""
    routings = list(routings)
    if not routings:
        raise ValueError("canzona.torch.moe.load_balancing_loss: no routing given")
    probs = torch.cat([r.probs for r in routings], 0)
    chosen = torch.cat([r.experts for r in routings], 0)
    share = torch.nn.functional.one_hot(chosen, num_experts).float().sum((0, 1)) / probs.shape[0]
    return num_experts * (share * probs.mean(0)).sum()


def _ep():
    """(size, rank) of this rank's EP group; (1, 0) on a grid without expert groups."""
    g = parallel.grid()
    if g.tp > 1:
        raise ValueError(f"canzona.torch.moe: TP {g.tp}: the MoE block runs with TP 1 (every "
                         "TP rank would dispatch its DP rank's tokens again)")
    return (g.ep, g.ep_rank) if g.ep > 0 else (1, 0)


class _AllToAll(torch.autograd.Function):
    """Rows of x: send_rows[r] to EP rank r; recv_rows[r] arrive from r. Backward: the reverse."""

    @staticmethod
    def forward(ctx, x, send_rows, recv_rows):
        ctx.rows = (send_rows, recv_rows)
        return _exchange(x, send_rows, recv_rows)

    @staticmethod
    def backward(ctx, grad):
        send_rows, recv_rows = ctx.rows
        return _exchange(grad, recv_rows, send_rows), None, None


def _exchange(x, send_rows, recv_rows):
    width = x.shape[1]
    send = x.detach().contiguous()
    if send.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"canzona.torch.moe: the EP All-to-All moves torch.float32 or "
                        f"torch.bfloat16 rows (got {send.dtype})")
    recv = torch.empty(sum(recv_rows), width, dtype=send.dtype)
    # bf16 crosses as its bits (int16): NumPy has no bfloat16.
    bits = (lambda t: t.view(torch.int16)) if send.dtype == torch.bfloat16 else (lambda t: t)
    parallel.grid().ep_all_to_all(bits(send).reshape(-1).numpy(), [r * width for r in send_rows],
                                  bits(recv).view(-1).numpy(), [r * width for r in recv_rows])
    return recv


def all_to_all(x, send_rows, recv_rows):
    """The EP All-to-All of rows as an autograd function: x [sum(send_rows), w] float32 or
    bfloat16, rows send_rows[r] to EP rank r; returns [sum(recv_rows), w], recv_rows[r] rows from
    rank r (which must equal what r sends here). Its backward sends the gradient back the same way
    reversed."""
    size, _ = _ep()
    if len(send_rows) != size or len(recv_rows) != size:
        raise ValueError(f"canzona.torch.moe.all_to_all: send_rows and recv_rows need one count "
                         f"per EP rank ({size})")
    if size == 1:
        return x
    return _AllToAll.apply(x, list(send_rows), list(recv_rows))


class Dispatched:
    """What dispatch() sends each local expert, and how combine() brings the outputs back."""

    def __init__(self, inputs, token, weight, send_rows, recv_rows, order, rows, n, h):
        self.inputs = inputs  # [local expert] rows it computes, [m_l, h]
        self._back = (token, weight, send_rows, recv_rows, order, rows, n, h)


def dispatch(x, routing, num_experts):
    """Sends every (token, choice) of this rank's tokens to the EP rank holding its expert.
    Returns a Dispatched whose `inputs[l]` are the rows local expert l computes (from every EP
    rank, in rank order; possibly none). Collective over the EP group."""
    size, rank = _ep()
    if num_experts % size:
        raise ValueError(f"canzona.torch.moe.dispatch: EP {size} does not divide num_experts "
                         f"{num_experts}")
    local = num_experts // size
    n, h = x.shape
    k = routing.experts.shape[1]
    flat = routing.experts.reshape(-1)
    # Assignments a = n k + j ordered by expert (so by destination EP rank), then by a.
    order = flat.sort(stable=True)[1]
    token = torch.div(order, k, rounding_mode="floor")
    weight = routing.weights.reshape(-1).index_select(0, order)
    sent = x.index_select(0, token)
    counts = torch.bincount(flat, minlength=num_experts).tolist()
    send_rows = [sum(counts[d * local:(d + 1) * local]) for d in range(size)]
    if size > 1:
        everyone = [json.loads(b) for b in
                    parallel.grid().ep_all_gather_bytes(json.dumps(counts).encode())]
        # from_[s][l]: rows of local expert l that EP rank s sends here.
        from_ = [c[rank * local:(rank + 1) * local] for c in everyone]
        recv_rows = [sum(f) for f in from_]
        received = _AllToAll.apply(sent, send_rows, recv_rows)
    else:
        from_ = [counts]
        recv_rows = send_rows
        received = sent
    # Received rows come by source rank, each source's by local expert: regroup by expert.
    offset, at = [], 0
    for s in range(size):
        row = []
        for l in range(local):
            row.append(at)
            at += from_[s][l]
        offset.append(row)
    perm, rows = [], []
    for l in range(local):
        m = 0
        for s in range(size):
            perm.extend(range(offset[s][l], offset[s][l] + from_[s][l]))
            m += from_[s][l]
        rows.append(m)
    order_back = torch.tensor(perm, dtype=torch.int64)
    grouped = received.index_select(0, order_back)
    inputs = list(torch.split(grouped, rows, 0)) if local else []
    return Dispatched(inputs, token, weight, send_rows, recv_rows, order_back, rows, n, h)


def combine(outputs, dispatched):
    """Brings local expert l's outputs[l] ([m_l, h'], the rows of dispatched.inputs[l]) back to
    the ranks whose tokens they are, and returns each token's weighted sum over its k choices
    ([N, h'], contributions in ascending expert order). Collective over the EP group."""
    token, weight, send_rows, recv_rows, order_back, rows, n, h = dispatched._back
    outputs = list(outputs)
    if len(outputs) != len(rows):
        raise ValueError(f"canzona.torch.moe.combine: {len(outputs)} outputs for {len(rows)} "
                         f"local experts")
    for l, (y, m) in enumerate(zip(outputs, rows)):
        if y.dim() != 2 or y.shape[0] != m:
            raise ValueError(f"canzona.torch.moe.combine: output {l} has shape "
                             f"{tuple(y.shape)}; its expert computed {m} rows")
    computed = torch.cat(outputs, 0).index_select(0, torch.argsort(order_back))
    width = computed.shape[1]
    back = computed
    if len(send_rows) > 1:
        back = _AllToAll.apply(computed, recv_rows, send_rows)
    out = torch.zeros(n, width, dtype=back.dtype)
    return out.index_add(0, token, back * weight.unsqueeze(1).to(back.dtype))


def experts_forward(x, routing, experts, num_experts):
    """dispatch, each local expert module on its rows (every one, rows or not), combine: the
    experts' output for this rank's tokens. x [N, h]; experts: this EP rank's expert modules in
    local order (num_experts / ep of them)."""
    experts = list(experts)
    size, _ = _ep()
    if len(experts) * size != num_experts:
        raise ValueError(f"canzona.torch.moe.experts_forward: {len(experts)} local experts x EP "
                         f"{size} != num_experts {num_experts}")
    d = dispatch(x, routing, num_experts)
    return combine([e(rows) for e, rows in zip(experts, d.inputs)], d)

"""A Hugging Face transformers Qwen3 (or Llama) trained with canzona.torch.DistributedOptimizer.

    mpirun --allow-run-as-root -np 2 env PYTHONPATH=build/python .venv/bin/python \\
        examples/hf_qwen3.py --strategy lb-asc --steps 50 --verify

transformers' Qwen3ForCausalLM (--arch llama: LlamaForCausalLM) built from a small config with
transformers' own random init (nothing is downloaded), trained on bytes of Debian's fortunes text
(vocabulary 256) with the loss transformers computes from labels. Each DP rank trains on its own
micro-batches; --verify replays the run in one process and prints whether the params are bitwise
those of the replay, exiting 1 when they are not. --save-dir, --save-every and --resume as in
examples/gpt.py (DistributedOptimizer.save / load); --plan-dp N (with --plan-tp M) prints
canzona.plan of the model (its config planned as `canzona plan --model config.json` plans it) at
N x M first.
"""
import os
import sys

import torch
import transformers

import canzona
import canzona.torch as ct
from canzona.torch.replay import replay

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import corpus, lr_lambda_for, parse_args, report_bitwise, train_and_report  # noqa: E402,E501


def make_model(a):
    common = dict(vocab_size=256, hidden_size=a.dim, intermediate_size=3 * a.dim,
                  num_hidden_layers=a.layers, num_attention_heads=a.heads,
                  num_key_value_heads=max(a.heads // 2, 1), head_dim=a.dim // a.heads,
                  max_position_embeddings=a.seq, tie_word_embeddings=False)
    torch.manual_seed(a.seed)
    if a.arch == "qwen3":
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common))
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))


def make_loss_fn(tokens, seq, batch, micros, seed):
    """loss_fn(model, step, micro, dp_rank): transformers' causal-LM loss of that rank's
    micro-batch (random windows of the text), over micros."""
    def loss_fn(model, step, micro, rank):
        g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + micro * 31 + rank)
        starts = torch.randint(0, len(tokens) - seq, (batch,), generator=g)
        chunk = torch.stack([tokens[s:s + seq] for s in starts.tolist()])
        return model(input_ids=chunk, labels=chunk).loss / micros
    return loss_fn


def main():
    a = parse_args(__doc__.split("\n")[0], precision=True, arch="qwen3", plan_dp=0, plan_tp=1)
    if a.arch not in ("qwen3", "llama"):
        raise SystemExit(f"hf_qwen3.py: --arch must be qwen3 or llama (got {a.arch!r})")
    loss_fn = make_loss_fn(corpus(), a.seq, a.batch, a.micro, a.seed)
    model = make_model(a).to(a.dtype)
    if a.plan_dp and int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")) == 0:
        print(canzona.plan(model, dp=a.plan_dp, tp=a.plan_tp), flush=True)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    opt = ct.DistributedOptimizer(model, a.optimizer, a.strategy, lr=a.lr, adamw_lr=a.adamw_lr,
                                  grad_reduce_in_fp32=a.grad_reduce_in_fp32)
    rank, dp = opt.dp_rank, opt.plan.dp
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"{type(model).__name__}: {n} params ({a.precision}), dp={dp}, strategy "
              f"{a.strategy}, {a.optimizer} on {len(opt.plan.tasks)} matrices, {a.micro} micro-batches of "
              f"{a.batch}x{a.seq} per rank per step (transformers {transformers.__version__}, "
              f"torch {torch.__version__})", flush=True)
    train_and_report(model, opt, loss_fn, a, "")
    if a.verify:
        ref, _ = replay(make_model(a).to(a.dtype), init, loss_fn, a.steps, a.micro, dp,
                        opt.kernel_settings, opt.matrix_param_names, (a.lr, a.adamw_lr),
                        lr_lambda_for(a.steps))
        report_bitwise(model, ref, rank)


if __name__ == "__main__":
    main()

"""One rank of DistributedOptimizer on models the project did not write, launched by
test_foreign.py under mpirun:

    mpirun -np N python foreign_worker.py MODEL RUNS STEPS OUT_DIR

MODEL: "encoder" (a torch.nn.TransformerEncoder LM: fused in_proj_weight, a learned 3-D position
table, a 0-D logit scale) or "vit" (torchvision's VisionTransformer: a 4-D conv patch embedding
given to Muon through matrix_view, 3-D class token and positions). RUNS: STRATEGY:ZERO_STAGE,...
Each run trains from the same init (DP rank 0's values, broadcast), with two micro-batches per
step (the first under no_sync), and compares the params bitwise with the single-process replay
(canzona.torch.replay: each DP rank's micro-batches in rank order, each gradient times
float(1/dp) summed in rank order, then the same kernels). Writes OUT_DIR/<MODEL>.<STRATEGY>.z<Z>
.rank<R>.json: bitwise, the params' SHA-256, params_hash, the memory held, the matrix views.
"""
import hashlib
import json
import os
import sys

import torch

import canzona.torch as ct
from canzona.torch.replay import replay

SEQ, DIM, VOCAB, BATCH, MICROS = 8, 16, 40, 2, 2


class EncoderLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.pos = torch.nn.Parameter(0.02 * torch.randn(1, SEQ, DIM))  # 3-D position table
        self.scale = torch.nn.Parameter(torch.tensor(1.0))  # 0-D
        layer = torch.nn.TransformerEncoderLayer(DIM, 2, 2 * DIM, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        return self.scale * self.head(self.encoder(x, mask=mask, is_causal=True))


def make(kind):
    if kind == "encoder":
        return EncoderLM()
    from torchvision.models import VisionTransformer
    return VisionTransformer(image_size=16, patch_size=4, num_layers=2, num_heads=2,
                             hidden_dim=DIM, mlp_dim=2 * DIM, num_classes=10)


def loss_fn(kind):
    def loss(model, step, micro, rank):
        g = torch.Generator().manual_seed(1000 * step + 10 * micro + rank)
        if kind == "encoder":
            t = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
            logits = model(t[:, :-1])
            return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                     t[:, 1:].reshape(-1)) / MICROS
        images = torch.randn(BATCH, 3, 16, 16, generator=g)
        labels = torch.randint(0, 10, (BATCH,), generator=g)
        return torch.nn.functional.cross_entropy(model(images), labels) / MICROS
    return loss


def params_bytes(model):
    return b"".join(p.detach().numpy().tobytes() for p in model.parameters())


def conv_view(name, p):
    return p.flatten(1) if p.dim() == 4 else None


def run(kind, strategy, zero_stage, steps, out_dir):
    torch.manual_seed(7 + int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    model = make(kind)
    torch.manual_seed(7)
    init = make(kind).state_dict()
    opt = ct.DistributedOptimizer(model, "muon", strategy, lr=0.02, adamw_lr=0.003,
                                  bucket_size=1500, zero_stage=zero_stage,
                                  matrix_view=conv_view if kind == "vit" else None)
    loss = loss_fn(kind)
    dp, rank = opt.plan.dp, opt.dp_rank
    for step in range(steps):
        for m in range(MICROS):
            if m < MICROS - 1:
                with opt.no_sync():
                    loss(model, step, m, rank).backward()
            else:
                loss(model, step, m, rank).backward()
        opt.step()
        opt.zero_grad()
    held = opt.memory_held()
    params_hash = opt.params_hash()
    with opt.gathered():
        got = params_bytes(model)
    ref, _ = replay(make(kind), init, loss, steps, MICROS, dp, opt.kernel_settings,
                    opt.matrix_param_names, (0.02, 0.003))
    report = {"rank": rank, "dp": dp, "bitwise": got == params_bytes(ref),
              "params_sha": hashlib.sha256(got).hexdigest()[:16], "params_hash": params_hash,
              "held": held, "matrix": opt.matrix_param_names,
              "views": {k: list(v) for k, v in opt.kernel_settings["matrix_views"].items()}}
    if strategy == "lb-asc" and zero_stage == 3:
        # Saved under ZeRO-3, loaded under ZeRO-1 and another strategy: the same params.
        report["checkpoint"] = opt.save(os.path.join(out_dir, f"{kind}-ckpt"))
        other = make(kind)
        reload = ct.DistributedOptimizer(other, "muon", "sc", bucket_size=1500,
                                         matrix_view=conv_view if kind == "vit" else None)
        reload.load(report["checkpoint"])
        reload.finish()
        report["reload_bitwise"] = params_bytes(other) == got
        reload.close()
    opt.close()
    with open(f"{out_dir}/{kind}.{strategy}.z{zero_stage}.rank{rank}.json", "w") as f:
        json.dump(report, f)


def main():
    kind, runs, steps, out_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    for item in runs.split(","):
        strategy, zero_stage = item.split(":")
        run(kind, strategy, int(zero_stage), steps, out_dir)


if __name__ == "__main__":
    main()

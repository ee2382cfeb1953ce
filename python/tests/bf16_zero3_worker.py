"""One rank of a bf16 ZeRO-3 run, launched by test_distributed.py under mpirun.

    mpirun -np N python3 bf16_zero3_worker.py OUT_DIR

Trains dist_worker.py's model cast to torch.bfloat16 for three steps of two micro-batches under
DistributedOptimizer (lb-asc) at ZeRO-1 and again at ZeRO-3 (each rank keeps its bf16 shard of
every bucket between uses, gathered around the forward and the backward), both again with
grad_reduce_in_fp32=True (param.main_grad: fp32 gradient buffers, released as the bf16 ones), and
writes OUT_DIR/rank<R>.json with the runs' params hashes.
"""
import json
import os
import sys

import torch

import canzona.torch as ct
import dist_worker as w


def run(stage, fp32_grads=False):
    torch.manual_seed(100 + int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    model = w.make_model(True)
    opt = ct.DistributedOptimizer(model, "muon", "lb-asc", lr=0.02, adamw_lr=0.003,
                                  bucket_size=600, zero_stage=stage,
                                  grad_reduce_in_fp32=fp32_grads)
    for step in range(3):
        with opt.no_sync():
            w.loss_of(model, step, 0, opt.dp_rank, 2).backward()
        w.loss_of(model, step, 1, opt.dp_rank, 2).backward()
        opt.step()
        opt.zero_grad()
    opt.finish()
    result = {"params_hash": opt.params_hash(), "zero_stage": opt.zero_stage,
              "dtype": str(model.fc.weight.dtype)}
    opt.close()
    return result


def main():
    report = {"one": run(1), "three": run(3), "one_fp32_grads": run(1, True),
              "three_fp32_grads": run(3, True)}
    with open(f"{sys.argv[1]}/rank{os.environ.get('OMPI_COMM_WORLD_RANK', '0')}.json", "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()

"""canzona.torch.moe's route, dispatch and combine at EP 2 against a float64 plain loop, and
DistributedOptimizer on a mixture-of-experts GPT (examples/moe.py) under expert parallelism
(moe_worker.py): at 4 ranks, EP 2 (expert DP 2), sc, asc and lb-asc under ZeRO-1 and lb-asc
under ZeRO-3 end with the same params on every rank; at EP 1 every run is bitwise the
single-process replay (the expert engine's gradients scaled and summed as the dense ones); a
checkpoint keeps every expert under its global index and loads under another strategy; the same
in bf16 (model.to(torch.bfloat16): bf16 All-to-Alls, buffers and checkpoint, fp32 main params);
the bad input of a MoE model raises the same error on every rank."""
import json

import torch
from test_distributed import launch

RUNS = ["sc:1", "asc:1", "lb-asc:1", "lb-asc:3"]
BF16_RUNS = ["sc:1:bf16", "lb-asc:3:bf16"]


def _reports(tmp_path, ep, np, runs=RUNS):
    def name(run):
        strategy, z, *bf16 = run.split(":")
        return f"ep{ep}.{strategy}.z{z}{'.bf16' if bf16 else ''}"
    return {run: [json.loads((tmp_path / f"{name(run)}.rank{r}.json").read_text())
                  for r in range(np)] for run in runs}


def test_ep2_runs_end_with_the_same_params_under_every_strategy_and_stage(tmp_path):
    proc = launch(4, "moe_worker.py", ["2", ",".join(RUNS + BF16_RUNS), "3"], tmp_path,
                  timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = _reports(tmp_path, 2, 4, RUNS + BF16_RUNS)
    for r in range(4):
        shas = {reports[run][r]["params_sha"] for run in RUNS}
        assert len(shas) == 1, (r, shas)
        bf16 = {reports[run][r]["params_sha"] for run in BF16_RUNS}
        assert len(bf16) == 1 and bf16 != shas, (r, bf16)
        assert {reports[run][r]["dtype"] for run in BF16_RUNS} == {"torch.bfloat16"}
    for run in RUNS + BF16_RUNS:
        ranks = reports[run]
        assert len({x["params_hash"] for x in ranks}) == 1, run
        # Each EP rank holds other experts; its expert DP ranks hold the same ones.
        by_ep = {}
        for x in ranks:
            by_ep.setdefault(x["ep_rank"], set()).add(x["params_sha"])
        assert len(by_ep) == 2 and all(len(s) == 1 for s in by_ep.values()), by_ep
        assert by_ep[0] != by_ep[1]
    for run in RUNS + BF16_RUNS:  # state_dict() -> load_state_dict(); each rank steps experts
        assert all(x["expert_states"] > 0 for x in reports[run]), run
        assert all(x["init_kept"] for x in reports[run]), run  # its own EP rank's experts
    z3 = reports["lb-asc:3"]
    assert all(x["reload_bitwise"] for x in z3)
    assert all(x["resume_bitwise"] for x in z3)
    # bf16: the checkpoint (BF16 weights, fp32 main params) loads under sc bit for bit, and the
    # next step from it is the run's next step.
    assert all(x["reload_bitwise"] and x["resume_bitwise"] for x in reports["lb-asc:3:bf16"])
    for run in ("lb-asc:1",):
        for r in range(4):
            assert z3[r]["held"]["params_bytes"] < reports[run][r]["held"]["params_bytes"]
    from safetensors.numpy import load_file
    model = load_file(f"{z3[0]['checkpoint']}/model.safetensors")
    state = load_file(f"{z3[0]['checkpoint']}/optimizer.safetensors")
    for layer in range(2):
        for e in range(4):  # every EP rank's experts, under their global index
            name = f"blocks.{layer}.moe.experts.{e}.fc1.weight"
            assert model[name].shape == (32, 16), name
            assert state[f"{name}.momentum_buffer"].shape == (32, 16), name
    assert "blocks.0.moe.experts.4.fc1.weight" not in model
    experts = {n for n in model if ".experts." in n}
    assert len({model[n].tobytes() for n in experts}) == len(experts)  # all different
    from safetensors import safe_open
    bf16_ckpt = reports["lb-asc:3:bf16"][0]["checkpoint"]
    with safe_open(f"{bf16_ckpt}/model.safetensors", "pt") as f:
        weight = f.get_tensor("blocks.0.moe.experts.3.fc1.weight")
    with safe_open(f"{bf16_ckpt}/optimizer.safetensors", "pt") as f:
        main = f.get_tensor("blocks.0.moe.experts.3.fc1.weight.main")
    assert weight.dtype == torch.bfloat16 and main.dtype == torch.float32
    assert torch.equal(main.bfloat16().view(torch.int16), weight.view(torch.int16))


def test_ep1_runs_are_bitwise_the_single_process_replay(tmp_path):
    proc = launch(2, "moe_worker.py", ["1", ",".join(RUNS + ["lb-asc:1:bf16"]), "3"], tmp_path,
                  timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = _reports(tmp_path, 1, 2, RUNS + ["lb-asc:1:bf16"])
    for run, ranks in reports.items():
        for x in ranks:
            assert x["bitwise"], f"{run}: rank {x['rank']} differs from the replay"
        assert "blocks.0.moe.experts.0.fc1.weight" in ranks[0]["matrix"]


BAD_INPUT = [
    ("ep_divides", "ValueError: canzona.torch.parallel.init: ep 3 x etp 1 = 3 does not divide "
                   "dp 2 x tp 1 = 2 ranks (expert DP = DP x TP / (EP x ETP))"),
    ("etp_alone", "ValueError: canzona.torch.parallel.init: etp needs ep"),
    ("shapes_differ", "ValueError: DistributedOptimizer: the expert params differ across EP "
                      "ranks: 'experts.0.weight' is [4, 4] on world rank 0 and [5, 4] on world "
                      "rank 1"),
    ("no_index", "ValueError: DistributedOptimizer: expert param 'pool.0.weight' has no local "
                 "expert index in its name"),
    ("per_token", "ValueError: DistributedOptimizer: experts_per_token must be an int in [1, 4] "
                  "(got 9)"),
    ("route_k", "ValueError: canzona.torch.moe.route: k must be an int in [1, 4] (got 5)"),
]


def test_moe_bad_input_raises_the_same_error_on_every_rank(tmp_path):
    proc = launch(2, "moe_worker.py", ["errors"], tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(2):
        results = json.loads((tmp_path / f"errors.rank{r}.json").read_text())
        for case, expected in BAD_INPUT:
            assert results[case].startswith(expected), f"rank {r}, {case}: {results[case]}"


def test_dispatch_and_combine_match_a_plain_loop_over_tokens_and_experts(tmp_path):
    proc = launch(2, "moe_worker.py", ["ops"], tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(2):
        report = json.loads((tmp_path / f"ops.rank{r}.json").read_text())
        for what in ("out", "fc1_grad", "fc2_grad"):  # fp32 against float64
            assert report[what] < 1e-5, (r, what, report[what])
        assert report["tie_experts"] == [[0, 1, 2], [0, 1, 2]]
        assert all(abs(w - 1 / 3) < 1e-7 for row in report["tie_weights"] for w in row)
        assert abs(report["balance"] - 2.0) < 1e-6

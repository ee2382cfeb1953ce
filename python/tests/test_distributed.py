"""canzona.torch.DistributedOptimizer under mpirun: every strategy bitwise the single-process
replay of the DP ranks' micro-batches (dist_worker.py; a bf16 model too, and under ZeRO-3
bf16_zero3_worker.py), bad input raised on every rank
(dist_errors.py), the TP layers against torch's (tp_worker.py), checkpoints that resume bitwise
and reshard (ckpt_worker.py)."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]


def launch(np, script, args, out, timeout=300):
    cmd = MPIRUN + ["-np", str(np), sys.executable, os.path.join(HERE, script), *args, str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc


STRATEGIES = ["sc", "layerwise", "layerwise-paper", "asc", "lb-asc", "fsdp-a2a"]


@pytest.mark.parametrize("np", [2, 3])
def test_every_strategy_is_bitwise_the_single_process_replay(tmp_path, np):
    proc = launch(np, "dist_worker.py", [",".join(STRATEGIES), "muon", "3", "2"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hashes = set()
    for strategy in STRATEGIES:
        reports = [json.loads((tmp_path / f"{strategy}.rank{r}.json").read_text())
                   for r in range(np)]
        for r in reports:
            assert r["dp"] == np
            assert r["bitwise"], f"{strategy}: rank {r['rank']} differs from the replay"
        assert len({r["params_sha"] for r in reports}) == 1, strategy
        assert len({r["params_hash"] for r in reports}) == 1, strategy
        assert reports[0]["tasks"] == 2  # fc.weight and proj.weight; embeddings get AdamW
        for r in reports:  # the examples' --verify replay gives the same bits
            assert r["replay_bitwise"], f"{strategy}: rank {r['rank']}: canzona.torch.replay"
        hashes.add(reports[0]["params_sha"])
    assert len(hashes) == 1  # every strategy, the same params


def test_a_bf16_model_is_bitwise_its_bf16_replay(tmp_path):
    """model.to(torch.bfloat16): bf16 buffers and fp32 main params, every strategy bitwise the bf16
    run the worker writes out itself (docs/precision.md), and all strategies the same params. DP 3:
    1/3 is not exact and three summands tell one rounding of the sum from two.
    With grad_reduce_in_fp32=True (+fp32grads) the gradients stay fp32 from the first backward
    on: param.main_grad, param.grad None; bitwise its own replay, and not the bf16-gradient
    run's params."""
    strategies = ["sc", "layerwise", "lb-asc", "fsdp-a2a"]
    fp32_grads = ["sc+fp32grads", "lb-asc+fp32grads"]
    proc = launch(3, "dist_worker.py", [",".join(strategies + fp32_grads), "muon", "3", "2",
                                        "bf16"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shas = {}
    for strategy in strategies + fp32_grads:
        for r in range(3):
            report = json.loads((tmp_path / f"{strategy}.rank{r}.json").read_text())
            assert report["precision"] == "bf16" and report["param_dtype"] == "torch.bfloat16"
            assert report["bitwise"], f"{strategy}: rank {r} differs from the bf16 replay"
            assert report["replay_bitwise"], f"{strategy}: canzona.torch.replay differs"
            assert report["grads_seen"] == ([["None", "torch.float32"]] if "+" in strategy
                                            else [["torch.bfloat16", "torch.bfloat16"]])
            shas.setdefault("+" in strategy, set()).add(report["params_sha"])
    assert len(shas[False]) == 1 and len(shas[True]) == 1
    assert shas[False] != shas[True]  # fp32 reduction is not bf16's


def test_a_bf16_model_under_zero3_is_bitwise_zero1(tmp_path):
    """zero_stage=3 with a bf16 model: each rank's 2-byte shards gathered around their use give
    the params of ZeRO-1, bit for bit; with grad_reduce_in_fp32 too."""
    proc = launch(3, "bf16_zero3_worker.py", [], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(3):
        report = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert report["three"]["zero_stage"] == 3 and report["three"]["dtype"] == "torch.bfloat16"
        assert report["one"]["params_hash"] == report["three"]["params_hash"], f"rank {r}"
        assert report["one_fp32_grads"]["params_hash"] == \
            report["three_fp32_grads"]["params_hash"], f"rank {r}"
        assert report["one_fp32_grads"]["params_hash"] != report["one"]["params_hash"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_bf16_gram_newton_schulz_is_bitwise_the_replay(tmp_path, precision):
    """optimizer_options={"ns_dtype": "bf16", "ns_algorithm": "gram"} (the 48 x 16 and 16 x 48
    matrices run the Gram iteration): every strategy bitwise a replay whose canzona.torch.Muon
    was given the same ns_dtype and ns_algorithm, for an fp32 and a bf16 model; one params hash
    across the strategies."""
    strategies = ["sc", "lb-asc", "fsdp-a2a"]
    args = [",".join(strategies), "muon-forms", "3", "2"] + (["bf16"] if precision == "bf16" else [])
    proc = launch(2, "dist_worker.py", args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shas = set()
    for strategy in strategies:
        for r in range(2):
            report = json.loads((tmp_path / f"{strategy}.rank{r}.json").read_text())
            assert report["bitwise"], f"{strategy}: rank {r} differs from the replay"
            assert report["replay_bitwise"], f"{strategy}: canzona.torch.replay differs"
            shas.add(report["params_sha"])
    assert len(shas) == 1


def test_shampoo_and_soap_are_bitwise_the_replay(tmp_path):
    for optimizer in ("shampoo", "soap"):
        proc = launch(2, "dist_worker.py", ["lb-asc", optimizer, "3", "2"], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        for r in range(2):
            assert json.loads((tmp_path / f"lb-asc.rank{r}.json").read_text())["bitwise"], \
                optimizer


BAD_INPUT = [
    ("world", "ValueError: DistributedOptimizer: world size 2 != dp 3 x tp 1 x pp 1 (launch with "
              "mpirun -np 3)"),
    ("dtype", "ValueError: DistributedOptimizer: param '0.weight' is torch.float64"),
    ("mixed_dtypes", "ValueError: DistributedOptimizer: param '1.weight' is torch.bfloat16 but "
                     "'0.weight' is torch.float32; every trained param must have one dtype"),
    ("grad_reduce", "TypeError: DistributedOptimizer: grad_reduce_in_fp32 must be a bool (got "
                    "1)"),
    ("rank_grad_reduce", "ValueError: DistributedOptimizer: ranks disagree on grad_reduce_in_fp32: "
                         "rank 0 has False, rank 1 True"),
    ("rank_dtypes", "ValueError: DistributedOptimizer: ranks disagree on the params' dtype: rank 0 "
                    "has fp32, rank 1 bf16"),
    ("noncontiguous", "ValueError: DistributedOptimizer: param '0.weight' is not contiguous"),
    ("unknown", "TypeError: DistributedOptimizer.__init__() got an unexpected keyword argument "
                "'momentum'"),
    ("option", "ValueError: DistributedOptimizer: muon option 'momentum' = 1.5 must be"),
    ("strategy", "ValueError: DistributedOptimizer: unknown strategy 'zero'"),
    ("no_backward", "ValueError: DistributedOptimizer: step() without a backward (first: "
                    "'0.weight')"),
    ("unused", "ValueError: DistributedOptimizer: 2 of 4 params got no gradient this step "
               "(first: '1.weight')"),
    ("resized", "ValueError: DistributedOptimizer: param '0.weight' was resized or replaced"),
    ("replaced", "ValueError: DistributedOptimizer: param '1.weight' was resized or replaced"),
    ("added", "ValueError: DistributedOptimizer: param 'extra.weight' was added after "
              "construction"),
    ("view_numel", "ValueError: DistributedOptimizer: matrix_view: param '0.weight' of shape "
                   "(4, 3, 2, 2) (48 elements) got the view (4, 13); it must be 2-D with as many "
                   "elements"),
    ("view_missing", "ValueError: DistributedOptimizer: model: param '0.weight' has 4 dims "
                     "(4, 3, 2, 2); the matrix optimizer needs its 2-D view: give matrix_view="),
    ("zero_stage", "ValueError: DistributedOptimizer: zero_stage must be 1 or 3 (got 2)"),
    ("collective_timeout", "ValueError: DistributedOptimizer: collective_timeout must be a number "
                           "of seconds in (0, 604800] (got 0)"),
    ("expert_no_ep", "ValueError: DistributedOptimizer: param '1.weight' is an expert param "
                     "(allreduce=False or expert_params) but the parallel grid has no expert "
                     "groups: call canzona.torch.parallel.init(ep=...)"),
    ("zero_strategy", "ValueError: DistributedOptimizer: zero_stage=3: strategy sc All-Reduces "
                      "gradients, so every rank keeps every param"),
]


def test_bad_input_raises_the_same_error_on_every_rank(tmp_path):
    proc = launch(2, "dist_errors.py", [",".join(c for c, _ in BAD_INPUT)], tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(2):
        results = json.loads((tmp_path / f"rank{r}.json").read_text())
        for case, expected in BAD_INPUT:
            assert results[case].startswith(expected), f"rank {r}, {case}: {results[case]}"


def test_a_hung_rank_ends_the_job_through_the_collective_timeout(tmp_path):
    """collective_timeout=5: rank 1 hangs before its second step; rank 0's wait ends its process
    with the timeout's one line (the operation, the group, the rank waited for) and exit 2, and
    mpirun ends the hung rank: the job ends long before rank 1's 120 s sleep."""
    import time
    t0 = time.monotonic()
    proc = launch(2, "timeout_worker.py", [], tmp_path, timeout=100)
    took = time.monotonic() - t0
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert took < 60, took
    lines = [l for l in proc.stderr.splitlines() if l.startswith("canzona:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "canzona: error: rank 0 (host " in lines[0], lines[0]
    assert "collective timeout: " in lines[0] and "did not complete within 5 s; waiting for " \
        "world rank 1 (--collective-timeout)" in lines[0], lines[0]
    assert "finished" not in proc.stdout


def test_tp_layers_match_torchs_plain_layers(tmp_path):
    proc = launch(2, "tp_worker.py", [], tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(2):
        report = json.loads((tmp_path / f"rank{r}.json").read_text())
        errors = report.pop("errors")
        bf16 = report.pop("bf16")
        assert report.pop("bf16_dtypes") == ["torch.bfloat16"]
        bf16_ce = report.pop("bf16_cross_entropy")
        assert set(report) == {"column", "row", "embedding", "cross_entropy"}
        for layer, values in report.items():
            assert "output" in values and len(values) >= 2
            for what, value in values.items():
                # fp32 sums in another order: a few ulps of the largest value.
                assert value <= 1e-6, f"rank {r}: {layer} {what}: {value}"
        # bf16: every output and gradient bf16. Each TP value is at most three bf16 roundings
        # (half an ulp each, at most 2^-8 of a value of the output's size: this rank's partial
        # sum, the other rank's, their fp32 sum rounded once) from the plain layer's, which
        # rounds once: 2^-6 of the largest value bounds them. A missing or doubled all-reduce, a
        # wrong shard or a wrong dtype moves at least one value by far more.
        assert set(bf16) == {"column", "row", "embedding"}
        for layer, values in bf16.items():
            assert "output" in values and len(values) >= 2
            for what, value in values.items():
                assert value <= 2.0 ** -6, f"rank {r}: bf16 {layer} {what}: {value}"
        # The cross-entropy widens bf16 logits and computes in fp32: torch's fp32 loss on the
        # same widened logits to fp32's few ulps; the loss float32, the logits' gradient bf16 (so
        # torch's fp32 gradient rounded once: half a bf16 ulp, at most 2^-8 of the value).
        assert bf16_ce["output"] <= 1e-6 and bf16_ce["dtypes"] == ["torch.float32",
                                                                   "torch.bfloat16"]
        assert bf16_ce["input_grad"] <= 2.0 ** -8 + 1e-6
        assert errors["column_divisible"] == \
            "ValueError: ColumnParallelLinear: out_features 5 is not divisible by tp 2"
        assert errors["row_divisible"] == \
            "ValueError: RowParallelLinear: in_features 5 is not divisible by tp 2"
        assert errors["vocab_divisible"] == \
            "ValueError: VocabParallelEmbedding: num_embeddings 9 is not divisible by tp 2"
        assert errors["collective_dtype"] == (
            "TypeError: canzona.torch.tensor_parallel: the TP collectives move torch.float32 or "
            "torch.bfloat16 (got torch.float64)")
        assert errors["grid_shape"].startswith(
            "ValueError: canzona.torch.parallel.init: the grid is dp 1 x tp 2 already")


def test_save_load_resumes_bitwise_and_reshards_across_dp_tp_and_strategy(tmp_path):
    """Saved at DP2 x TP2 under lb-asc after 2 steps: loaded under sc at DP2 x TP2 the next 2
    steps are bitwise the uninterrupted run's; loaded under asc at DP3 x TP1 (and under sc) a
    save at the same step writes byte-identical model and optimizer files; model.safetensors
    read by a plain reader holds every param under its own name."""
    ckpt = tmp_path / "ckpt"
    runs = [("train", 4, 2, "lb-asc", tmp_path / "a"), ("resume", 4, 2, "sc", tmp_path / "b"),
            ("resume", 3, 1, "asc", tmp_path / "c")]
    for mode, np, tp, strategy, out in runs:
        out.mkdir()
        proc = launch(np, "ckpt_worker.py", [mode, str(tp), strategy, str(ckpt)], out)
        assert proc.returncode == 0, proc.stderr[-3000:]
    read = lambda out, mode, r: json.loads((out / f"{mode}.rank{r}.json").read_text())  # noqa
    train = [read(tmp_path / "a", "train", r) for r in range(4)]
    same_grid = [read(tmp_path / "b", "resume", r) for r in range(4)]
    other_grid = [read(tmp_path / "c", "resume", r) for r in range(3)]
    for before, after in zip(train, same_grid):
        assert after["losses"] == before["losses"]
        assert after["params_hash"] == before["params_hash"]
    for report in same_grid + other_grid:
        assert report["loaded"] == str(ckpt / "step-00000002")
        assert report["lr"] == [0.01, 0.003]  # the matrix group's lr as saved, not as made
        assert report["sha"] == train[0]["sha"]
    for report in other_grid:
        assert report["names_match"] and report["values_match"] and report["loaded_match"]
        errors = report["errors"]
        assert errors["missing"].startswith("ValueError: ") and "nowhere" in errors["missing"]
        assert errors["optimizer"].startswith(
            f"ValueError: {ckpt}/step-00000002/trainer.json: saved with optimizer 'muon', this "
            "run uses 'shampoo'")
        assert errors["model"].startswith(
            f"ValueError: {ckpt}/step-00000002/config.json: does not match the model being "
            "trained (saved vs this run: 20 params vs 2)")


def test_a_bf16_checkpoint_resumes_bitwise_and_loads_widened_into_float32(tmp_path):
    """A bf16 model's checkpoint (docs/checkpoints.md): model.safetensors in BF16, the fp32 main
    params beside the optimizer state. Saved at DP2 x TP2 under lb-asc, loaded under sc at the
    same grid: the files it saves again at the same step are byte-identical and the next 2 steps
    bitwise the uninterrupted run's (the main params came back: re-deriving them from the BF16
    weights would lose their low bits). Loaded by a float32 model at DP3 x TP1: each param is its
    BF16 weight widened, as a plain reader of the file widens it."""
    ckpt = tmp_path / "ckpt"
    runs = [("train:bf16", 4, 2, "lb-asc", tmp_path / "a"),
            ("resume:bf16", 4, 2, "sc", tmp_path / "b"), ("resume", 3, 1, "asc", tmp_path / "c")]
    for mode, np, tp, strategy, out in runs:
        out.mkdir()
        proc = launch(np, "ckpt_worker.py", [mode, str(tp), strategy, str(ckpt)], out)
        assert proc.returncode == 0, proc.stderr[-3000:]
    read = lambda out, mode, r: json.loads((out / f"{mode}.rank{r}.json").read_text())  # noqa
    train = [read(tmp_path / "a", "train.bf16", r) for r in range(4)]
    resumed = [read(tmp_path / "b", "resume.bf16", r) for r in range(4)]
    widened = [read(tmp_path / "c", "resume", r) for r in range(3)]
    assert train[0]["model_dtypes"] == ["BF16"]
    for before, after in zip(train, resumed):
        assert after["loaded"] == str(ckpt / "step-00000002")
        assert after["sha"] == before["sha"]
        assert after["losses"] == before["losses"]
        assert after["params_hash"] == before["params_hash"]
    for report in widened:
        assert report["model_dtypes"] == ["F32"]
        assert report["names_match"] and report["values_match"] and report["loaded_match"]

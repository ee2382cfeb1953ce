"""DistributedOptimizer on models the project did not write (foreign_worker.py): a
torch.nn.TransformerEncoder LM (fused in_proj_weight, nn.MultiheadAttention reading out_proj's
weight without calling out_proj, a 3-D position table, a 0-D scale) and torchvision's
VisionTransformer (a 4-D conv patch embedding given to Muon through matrix_view, 3-D class token
and positions). At DP=2, under sc, asc and lb-asc with ZeRO-1 and asc, lb-asc with ZeRO-3: every
run bitwise the single-process replay, one params hash across all, ZeRO-3 keeping less; the
checkpoint keeps every param in its own shape and loads under another strategy and stage."""
import json

import pytest
import torch
from test_distributed import launch

RUNS = ["sc:1", "asc:1", "lb-asc:1", "asc:3", "lb-asc:3"]


def _reports(tmp_path, kind):
    out = {}
    for run in RUNS:
        strategy, z = run.split(":")
        out[run] = [json.loads((tmp_path / f"{kind}.{strategy}.z{z}.rank{r}.json").read_text())
                    for r in range(2)]
    return out


@pytest.mark.parametrize("kind", ["encoder", "vit"])
def test_foreign_models_are_bitwise_the_replay_under_every_strategy_and_stage(tmp_path, kind):
    if kind == "vit":
        pytest.importorskip("torchvision")
    proc = launch(2, "foreign_worker.py", [kind, ",".join(RUNS), "3"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = _reports(tmp_path, kind)
    shas = set()
    for run, ranks in reports.items():
        for r in ranks:
            assert r["bitwise"], f"{kind} {run}: rank {r['rank']} differs from the replay"
        assert ranks[0]["params_hash"] == ranks[1]["params_hash"], run
        shas.update(r["params_sha"] for r in ranks)
    assert len(shas) == 1, shas  # every strategy and stage, the same params
    for run in ("asc", "lb-asc"):
        for r in range(2):
            assert reports[f"{run}:3"][r]["held"]["params_bytes"] < \
                reports[f"{run}:1"][r]["held"]["params_bytes"], run
    z3 = reports["lb-asc:3"][0]
    assert z3["reload_bitwise"] and reports["lb-asc:3"][1]["reload_bitwise"]
    from safetensors.numpy import load_file
    model = load_file(f"{z3['checkpoint']}/model.safetensors")
    state = load_file(f"{z3['checkpoint']}/optimizer.safetensors")
    if kind == "encoder":
        assert model["pos"].shape == (1, 8, 16) and model["scale"].shape == ()
        assert "pos" not in z3["matrix"] and "scale" not in z3["matrix"]
        assert "encoder.layers.0.self_attn.in_proj_weight" in z3["matrix"]
        assert z3["views"] == {}
    else:
        assert z3["views"] == {"conv_proj.weight": [16, 48]}  # 16 filters of 3 x 4 x 4
        assert "conv_proj.weight" in z3["matrix"] and "class_token" not in z3["matrix"]
        assert model["conv_proj.weight"].shape == (16, 3, 4, 4)
        assert model["class_token"].shape == (1, 1, 16)
        assert model["encoder.pos_embedding"].shape == (1, 17, 16)
        assert state["conv_proj.weight.momentum_buffer"].shape == (16, 48)
        assert state["class_token.exp_avg"].shape == (1, 1, 16)
    assert torch is not None

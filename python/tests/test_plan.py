"""canzona.plan: the same plans as `canzona plan` from a torch model, named params, a list, a
config; the Plan object; bad input."""
import json
import subprocess

import pytest
import torch

import canzona

# A small Qwen3 config in Hugging Face's keys (what `canzona plan --model config.json` reads).
HF_CONFIG = {
    "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 300, "tie_word_embeddings": False,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096,
}


def _tp_param(shape, tp, dim):
    """One TP shard of a param of `shape` split along `dim`, tagged the way Megatron does."""
    local = list(shape)
    if dim >= 0:
        local[dim] //= tp
    p = torch.nn.Parameter(torch.zeros(local))
    if dim >= 0:
        p.tensor_model_parallel = True
        p.partition_dim = dim
    return p


class Attention(torch.nn.Module):
    def __init__(self, c, tp):
        super().__init__()
        h, d = c["hidden_size"], c["head_dim"]
        q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
        self.linear_proj = torch.nn.Module()
        self.linear_proj.weight = _tp_param((h, q), tp, 1)
        self.linear_qkv = torch.nn.Module()
        self.linear_qkv.layer_norm_weight = _tp_param((h,), tp, -1)
        self.linear_qkv.weight = _tp_param((q + 2 * kv, h), tp, 0)
        self.q_layernorm = torch.nn.Module()
        self.q_layernorm.weight = _tp_param((d,), tp, -1)
        self.k_layernorm = torch.nn.Module()
        self.k_layernorm.weight = _tp_param((d,), tp, -1)


class Mlp(torch.nn.Module):
    def __init__(self, c, tp):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.linear_fc1 = torch.nn.Module()
        self.linear_fc1.layer_norm_weight = _tp_param((h,), tp, -1)
        self.linear_fc1.weight = _tp_param((2 * f, h), tp, 0)
        self.linear_fc2 = torch.nn.Module()
        self.linear_fc2.weight = _tp_param((h, f), tp, 1)


class Layer(torch.nn.Module):
    def __init__(self, c, tp):
        super().__init__()
        self.self_attention = Attention(c, tp)
        self.mlp = Mlp(c, tp)


class MegatronQwen3(torch.nn.Module):
    """Qwen3 of `c` in Megatron's layout and registration order, built for TP degree `tp`."""

    def __init__(self, c, tp=1):
        super().__init__()
        unit = 128 * tp  # Megatron pads the vocabulary to a multiple of 128 x tp
        vocab = (c["vocab_size"] + unit - 1) // unit * unit
        self.embedding = torch.nn.Module()
        self.embedding.word_embeddings = torch.nn.Embedding(vocab // tp, c["hidden_size"])
        self.embedding.word_embeddings.weight.tensor_model_parallel = True
        self.embedding.word_embeddings.weight.partition_dim = 0
        self.decoder = torch.nn.Module()
        self.decoder.layers = torch.nn.ModuleList(
            Layer(c, tp) for _ in range(c["num_hidden_layers"]))
        self.decoder.final_layernorm = torch.nn.Module()
        self.decoder.final_layernorm.weight = _tp_param((c["hidden_size"],), tp, -1)
        self.output_layer = torch.nn.Module()
        self.output_layer.weight = _tp_param((vocab, c["hidden_size"]), tp, 0)


def cli_plan(cli, tmp_path, model, *flags):
    out = tmp_path / "plan.json"
    subprocess.run([cli, "plan", "--model", str(model), "--json", str(out), *flags], check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(HF_CONFIG))
    return path


@pytest.mark.parametrize("dp,tp,strategy,zero_stage", [
    (4, 1, "lb-asc", 1), (2, 2, "lb-asc", 1), (3, 2, "asc", 1), (2, 2, "layerwise", 1),
    (4, 1, "lb-asc", 3), (2, 2, "fsdp-a2a", 3)])
def test_torch_model_plans_as_the_cli_plans_its_config(canzona_cli, tmp_path, config_path, dp, tp,
                                                        strategy, zero_stage):
    expected = cli_plan(canzona_cli, tmp_path, config_path, "--dp", str(dp), "--tp", str(tp),
                        "--strategy", strategy, "--zero-stage", str(zero_stage))
    model = MegatronQwen3(HF_CONFIG, tp)
    for source in (model, model.named_parameters()):
        got = canzona.plan(source, dp=dp, tp=tp, strategy=strategy, zero_stage=zero_stage)
        assert got.plan_hash == expected["plan_hash"]
        assert got.balance == expected["balance"]
        # Every param's owner and every task's host as the CLI's document has them.
        for bucket in expected["buckets"]:
            for p in bucket["params"]:
                assert got.owner(p["name"]) == p["owner"], p["name"]
        cli_tasks = [(t["name"], t["dp_owner"], t["host"], t["group"])
                     for s in expected["stages"] for t in s["tasks"]]
        assert [(t["name"], t["dp_owner"], t["host"], t["group"]) for t in got.tasks] == cli_tasks
        assert len(got.micro_groups) == len(expected["micro_groups"])
    # The config path itself, through the package, gives the CLI's document.
    same = canzona.plan(str(config_path), dp=dp, tp=tp, strategy=strategy, zero_stage=zero_stage)
    doc = json.loads(same.to_json())
    doc.pop("plan_ms"), expected.pop("plan_ms")
    assert doc["zero_stage"] == zero_stage
    assert doc == expected


@pytest.mark.parametrize("flags,kwargs", [
    (["--precision", "bf16"], dict(precision="bf16")),
    (["--precision", "bf16", "--grad-reduce-in-fp32"],
     dict(precision="bf16", grad_reduce_in_fp32=True))])
def test_precision_plans_as_the_cli_plans_it(canzona_cli, tmp_path, config_path, flags, kwargs):
    """precision= and grad_reduce_in_fp32= are --precision and --grad-reduce-in-fp32: the CLI's
    document, the bytes it prices at the bf16 sizes, not fp32's."""
    expected = cli_plan(canzona_cli, tmp_path, config_path, "--dp", "4", "--tp", "2", *flags)
    fp32 = cli_plan(canzona_cli, tmp_path, config_path, "--dp", "4", "--tp", "2")
    got = canzona.plan(MegatronQwen3(HF_CONFIG, 2), dp=4, tp=2, **kwargs)
    assert got.plan_hash == expected["plan_hash"] and got.balance == expected["balance"]
    doc = json.loads(canzona.plan(str(config_path), dp=4, tp=2, **kwargs).to_json())
    doc.pop("plan_ms"), expected.pop("plan_ms"), fp32.pop("plan_ms")
    assert doc == expected
    assert doc["precision"] == "bf16" and fp32["precision"] == "fp32"
    assert doc != {**fp32, "precision": "bf16"}  # more than the label differs


def test_ns_options_plan_as_the_cli_plans_them(canzona_cli, tmp_path, config_path):
    """ns_algorithm= and ns_dtype= are --ns-algorithm and --ns-dtype: the same document; the Gram
    iteration's FLOPs are what the plan balances (its total differs from the standard one's)."""
    expected = cli_plan(canzona_cli, tmp_path, config_path, "--dp", "4", "--ns-algorithm", "gram",
                        "--ns-dtype", "bf16")
    standard = cli_plan(canzona_cli, tmp_path, config_path, "--dp", "4")
    doc = json.loads(canzona.plan(str(config_path), dp=4, ns_algorithm="gram",
                                  ns_dtype="bf16").to_json())
    doc.pop("plan_ms"), expected.pop("plan_ms"), standard.pop("plan_ms")
    assert doc == expected
    assert doc["optimizer_options"] == {"ns_algorithm": "gram", "ns_dtype": "bf16"}
    assert standard["optimizer_options"] == {}
    # On Qwen3-0.6B the Gram FLOPs move cuts and owners.
    assert canzona.plan("qwen3-0.6b", dp=4, ns_algorithm="gram").plan_hash != \
        canzona.plan("qwen3-0.6b", dp=4).plan_hash
    with pytest.raises(ValueError, match="ns_algorithm"):
        canzona.plan(str(config_path), dp=4, ns_algorithm="fast")


def test_a_list_of_names_shapes_and_splits_plans_like_the_module(canzona_cli, tmp_path):
    model = MegatronQwen3(HF_CONFIG, 2)
    listed = []
    for name, p in model.named_parameters():
        shape = list(p.shape)
        dim = getattr(p, "partition_dim", -1) if getattr(p, "tensor_model_parallel", False) else -1
        if dim >= 0:
            shape[dim] *= 2
        listed.append((name, tuple(shape), dim))
    a = canzona.plan(listed, dp=2, tp=2, is_matrix=lambda n, s: len(s) == 2 and "embedd" not in n
                     and "output_layer" not in n)
    b = canzona.plan(model, dp=2, tp=2)
    assert a.plan_hash == b.plan_hash
    # The planner's --from-plan accepts the package's document (the recipe keys are all there).
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"name": "MegatronQwen3", "params": [
        {"name": n, "shape": list(s), "tp_split_dim": d} for n, s, d in listed]}))
    old = tmp_path / "old.json"
    old.write_text(canzona.plan(str(params), dp=2, tp=2).to_json())
    replanned = cli_plan(canzona_cli, tmp_path, params, "--dp", "4", "--tp", "2", "--from-plan",
                         str(old))
    assert replanned["replan"]["from_plan_hash"] == b.plan_hash


def test_plan_object_reports_hosts_owners_and_round_trips_as_json():
    p = canzona.plan("qwen3-tiny", dp=2, tp=2, split_qkv="qkv", split_fc1=True)
    assert p.dp == 2 and p.tp == 2 and p.strategy == "lb-asc"
    assert {t["host"] for t in p.tasks} <= {0, 1}
    for t in p.tasks:
        assert p.host(t["name"]) == t["host"]
        assert t["dp_owner"] in (0, 1)
    assert p.owner("embedding.word_embeddings.weight") in (0, 1, "divided")
    assert json.loads(p.to_json())["plan_hash"] == p.plan_hash
    assert p.balance["dp"]["flops"] >= 1.0
    with pytest.raises(KeyError, match="no param named 'nope'"):
        p.owner("nope")


def test_embedding_modules_and_is_matrix_choose_the_optimizer_class():
    class Gpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(64, 16)  # no "embedding" in its name
            self.fc = torch.nn.Linear(16, 32)

    m = Gpt()
    p = canzona.plan(m, dp=2)
    assert [t["name"] for t in p.tasks] == ["fc.weight"]
    q = canzona.plan(m, dp=2, is_matrix=lambda name, t: False)
    assert q.tasks == []


def test_params_of_any_rank_plan_as_adamw_or_a_declared_matrix_view(canzona_cli, tmp_path):
    class Vit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 4)  # 4-D filter
            self.cls = torch.nn.Parameter(torch.zeros(1, 1, 8))  # 3-D
            self.temperature = torch.nn.Parameter(torch.tensor(1.0))  # 0-D
            self.fc = torch.nn.Linear(8, 8)

    m = Vit()
    plain = canzona.plan(m, dp=2)
    assert [t["name"] for t in plain.tasks] == ["fc.weight"]  # the others get AdamW
    viewed = canzona.plan(m, dp=2, matrix_view=lambda n, p: p.flatten(1) if p.dim() == 4 else None)
    assert sorted((t["name"], tuple(t["shape"])) for t in viewed.tasks) == \
        [("conv.weight", (8, 48)), ("fc.weight", (8, 8))]
    assert canzona.plan(m, dp=2, matrix_view=lambda n, p: p.flatten(1) if p.dim() == 4 else None,
                        is_matrix=lambda n, p: n == "fc.weight").tasks == plain.tasks
    # The CLI plans the param list (own shapes, the declared view) to the same plan.
    params = tmp_path / "vit.json"
    params.write_text(json.dumps({"name": "Vit", "params": [  # named_parameters() order
        {"name": "cls", "shape": [1, 1, 8]}, {"name": "temperature", "shape": []},
        {"name": "conv.weight", "shape": [8, 3, 4, 4], "matrix_view": [8, 48]},
        {"name": "conv.bias", "shape": [8]}, {"name": "fc.weight", "shape": [8, 8]},
        {"name": "fc.bias", "shape": [8]}]}))
    assert cli_plan(canzona_cli, tmp_path, params, "--dp", "2")["plan_hash"] == viewed.plan_hash


def test_moe_models_plan_an_expert_buffer_over_the_expert_groups():
    p = canzona.plan("qwen3-moe-cpu", dp=2, tp=2, ep=2)
    assert set(p.balance["expert"]) >= {"dp", "tp", "grid"}
    assert p.balance["expert"]["dp"]["flops"] >= 1.0
    assert json.loads(p.to_json())["expert"]["edp"] == 2
    with pytest.raises(ValueError, match="--ep 3 x --etp 1 = 3 does not divide"):
        canzona.plan("qwen3-moe-cpu", dp=2, tp=2, ep=3)
    with pytest.raises(TypeError, match="ep must be an int"):
        canzona.plan("qwen3-moe-cpu", ep="2")


def test_strategies_lists_the_strategy_table_in_design_order():
    rows = canzona.strategies()
    assert [r["name"] for r in rows] == ["sc", "layerwise", "layerwise-paper", "asc", "lb-asc",
                                         "fsdp-a2a"]
    assert {r["name"] for r in rows if r["zero3"]} == {"asc", "lb-asc", "fsdp-a2a"}
    assert {r["name"]: r["compute_share"] for r in rows} == {
        "sc": "none", "layerwise": "dp", "layerwise-paper": "dp", "asc": "grid", "lb-asc": "grid",
        "fsdp-a2a": "dp"}
    for r in rows:  # every name is one strategy= takes, under the stage the table allows
        canzona.plan("qwen3-tiny", dp=2, strategy=r["name"], zero_stage=3 if r["zero3"] else 1)


@pytest.mark.parametrize("kwargs,match", [
    (dict(dp=0), "dp"), (dict(tp=2), "tp"), (dict(strategy="nope"), "nope"),
    (dict(optimizer="adamw"), "adamw"), (dict(zero_stage=3, strategy="sc"), "zero-stage 3"),
    (dict(zero_stage=2), "zero-stage 2: must be 1"), (dict(pp=0), "--pp must be positive"),
    (dict(alpha=2.0), "alpha"), (dict(bucket_size=-1), "bucket_size"),
    (dict(split_qkv="rows"), "rows"), (dict(cost="calibrated"), "calibration=FILE"),
    (dict(cost="calibrated", calibration="/nonexistent/cal.json"), "/nonexistent/cal.json"),
    (dict(precision="fp16"), "precision must be fp32 or bf16 .got 'fp16'.")])
def test_bad_options_raise_value_errors_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        canzona.plan([("a.weight", (6, 4), -1), ("b.weight", (3, 3), 0)], **kwargs)


def test_bad_models_raise_naming_the_param_or_argument():
    with pytest.raises(TypeError, match="unexpected keyword argument 'dpp'"):
        canzona.plan("qwen3-tiny", dpp=2)
    with pytest.raises(TypeError, match="dp must be an int"):
        canzona.plan("qwen3-tiny", dp="2")
    with pytest.raises(ValueError, match="'conv.weight' has 4 dims .*give matrix_view="):
        canzona.plan([("conv.weight", torch.zeros(2, 3, 4, 4))], is_matrix=lambda n, t: True)
    with pytest.raises(ValueError, match="'conv.weight' of shape .*got the view \\(3, 31\\)"):
        canzona.plan([("conv.weight", torch.zeros(2, 3, 4, 4))], matrix_view=lambda n, t: (3, 31))
    with pytest.raises(ValueError, match="unknown model 'qwen9'"):
        canzona.plan("qwen9")
    with pytest.raises(ValueError, match="tp_split_dim must be -1, 0 or 1"):
        canzona.plan([("w", (4, 4), 2)])
    with pytest.raises(ValueError, match="has no params"):
        canzona.plan([])
    with pytest.raises(TypeError, match="model must be"):
        canzona.plan(3.5)
    with pytest.raises(ValueError, match="duplicate|twice|already"):
        canzona.plan([("w", (4, 4), -1), ("w", (4, 4), -1)])

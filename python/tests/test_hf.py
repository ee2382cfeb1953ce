"""Hugging Face transformers models (Qwen3ForCausalLM, LlamaForCausalLM, built from configs with
random init) under canzona.torch: every strategy bitwise the single-process replay at DP=2 with one
params hash (hf_worker.py), and canzona.plan of such a module equal to `canzona plan --model
config.json` of the config save_pretrained writes."""
import json
import os
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")  # in .venv; Debian's torch 1.13 has none

import canzona
from test_distributed import MPIRUN, STRATEGIES

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_every_strategy_is_bitwise_the_replay_with_one_hash(tmp_path, arch):
    cmd = MPIRUN + ["-np", "2", sys.executable, os.path.join(HERE, "hf_worker.py"), arch,
                    ",".join(STRATEGIES), "2", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shas, hashes = set(), set()
    for strategy in STRATEGIES:
        reports = [json.loads((tmp_path / f"{arch}.{strategy}.rank{r}.json").read_text())
                   for r in range(2)]
        for r in reports:
            assert r["dp"] == 2
            assert r["changed"], f"{strategy}: training left the params as they were"
            assert r["bitwise"], f"{strategy}: rank {r['rank']} differs from the replay"
            # The 2-D Linear weights get Muon: 7 per layer (q, k, v, o, gate, up, down) and
            # lm_head; the embedding (nn.Embedding) and the norms get AdamW.
            assert len(r["matrices"]) == 2 * 7 + 1
            assert "lm_head.weight" in r["matrices"]
            assert "model.embed_tokens.weight" not in r["matrices"]
        shas.update(r["params_sha"] for r in reports)
        hashes.update(r["params_hash"] for r in reports)
    assert len(shas) == 1 and len(hashes) == 1  # every strategy, every rank: the same params


def _plan_doc(text):
    doc = json.loads(text)
    doc.pop("plan_ms", None)
    return doc


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_plan_of_the_module_is_the_plan_of_its_config_json(tmp_path, arch, canzona_cli):
    sys.path.insert(0, HERE)
    from hf_worker import model_of
    model = model_of(arch, 0)
    model.save_pretrained(tmp_path / "hf")
    args = ["--dp", "4", "--tp", "2", "--strategy", "lb-asc", "--optimizer", "muon"]
    out = tmp_path / "cli.json"
    subprocess.run([canzona_cli, "plan", "--model", str(tmp_path / "hf" / "config.json"), *args,
                    "--json", str(out)], check=True, capture_output=True)
    cli = _plan_doc(out.read_text())
    ours = _plan_doc(canzona.plan(model, dp=4, tp=2, strategy="lb-asc",
                                  optimizer="muon", name="hf").to_json())
    assert ours["zero_stage"] == 1
    assert ours == cli
    # Megatron's layout of the config: fused QKV and gate/up per layer, not the module's names.
    names = {p["name"] for b in cli["stages"][0]["buckets"] for p in b["params"]}
    assert any("linear_qkv" in n for n in names), sorted(names)[:5]


def test_train_init_from_reads_save_pretrained_and_from_pretrained_reads_its_checkpoint(
        tmp_path, canzona_cli):
    """save_pretrained -> `canzona train --init-from` (one step at lr 0, which leaves every
    weight as it was) -> its checkpoint -> from_pretrained: every tensor comes back bit for bit,
    and the transformers 5 config (rope_theta inside rope_parameters) is read as written."""
    cfg = transformers.Qwen3Config(vocab_size=512, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=128, tie_word_embeddings=False,
                                   rope_parameters={"rope_type": "default",
                                                    "rope_theta": 250000.0})
    torch.manual_seed(3)
    model = transformers.Qwen3ForCausalLM(cfg)
    model.save_pretrained(tmp_path / "hf")
    assert "rope_theta" not in json.loads((tmp_path / "hf" / "config.json").read_text())
    cmd = [canzona_cli, "train", "--init-from", str(tmp_path / "hf"), "--steps", "1", "--lr",
           "0", "--adamw-lr", "0", "--seq-len", "32", "--micro-batch", "2", "--warmup", "1",
           "--eval-every", "0", "--save-dir", str(tmp_path / "out"), "--save-every", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMPI_MCA_btl="self,vader"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    step = tmp_path / "out" / "step-00000001"
    saved = json.loads((step / "config.json").read_text())
    assert saved.get("rope_theta", saved.get("rope_parameters", {}).get("rope_theta")) == 250000.0
    back = transformers.Qwen3ForCausalLM.from_pretrained(step)
    want = model.state_dict()
    got = back.state_dict()
    assert sorted(got) == sorted(want)
    for name, tensor in want.items():
        assert torch.equal(got[name].view(torch.int32), tensor.view(torch.int32)), name


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_save_writes_what_from_pretrained_loads(tmp_path, arch):
    """DistributedOptimizer.save on a transformers model at DP=2: config.json is the model's HF
    config (the param list in params.json), from_pretrained of the checkpoint holds the trained
    params bit for bit, and load() under another strategy restores them into a fresh model. A
    bf16 model's checkpoint says torch_dtype bfloat16 and from_pretrained gives its bf16 bits."""
    cmd = MPIRUN + ["-np", "2", sys.executable, os.path.join(HERE, "hf_worker.py"), arch, "save",
                    "2", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(2):
        report = json.loads((tmp_path / f"{arch}.save.rank{r}.json").read_text())
        assert report["changed"] and report["from_pretrained"] and report["load"], report
        assert report["step_count"] == 2
        assert report["bf16_from_pretrained"] and report["bf16_dtype"] == "torch.bfloat16"
    step = tmp_path / "ckpt" / "step-00000002"
    config = json.loads((step / "config.json").read_text())
    assert config["model_type"] == arch and config["num_hidden_layers"] == 2
    # The dtype model.safetensors holds, under transformers 5's key and 4.x's.
    assert config["dtype"] == config["torch_dtype"] == "float32"
    bf16 = json.loads((tmp_path / "ckpt-bf16" / "step-00000001" / "config.json").read_text())
    assert bf16["dtype"] == bf16["torch_dtype"] == "bfloat16"
    assert config["architectures"] == [{"qwen3": "Qwen3ForCausalLM",
                                        "llama": "LlamaForCausalLM"}[arch]]
    params = json.loads((step / "params.json").read_text())
    assert len(params["params"]) == 2 * (11 if arch == "qwen3" else 9) + 3  # q/k norms in Qwen3
    trainer = json.loads((step / "trainer.json").read_text())
    assert set(trainer["files"]) == {"model.safetensors", "optimizer.safetensors", "config.json",
                                     "plan.json", "params.json"}

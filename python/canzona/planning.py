"""canzona.plan: the planner of `canzona plan`, on a preset, a config file, a param list or a
PyTorch model (docs/python.md)."""
import json
import math
import os
import re
import tempfile

from canzona import _canzona

# Megatron's attributes on tensor-parallel params (megatron/core/tensor_parallel/layers.py): the
# param is one TP rank's shard, split along partition_dim of the full matrix.
_TP_ATTR = "tensor_model_parallel"
_DIM_ATTR = "partition_dim"

_LAYER = re.compile(r"(?:^|\.)(?:[A-Za-z_]*layer_)?(\d+)(?:\.|$)")

# The most dims a param's own shape may have (the C++ reader's kMaxTensorDims).
_MAX_TENSOR_DIMS = 8


def _layer_of(name):
    """The first component of a dotted name that is a number or a word ending in 'layer_<n>'
    ("decoder.layers.3.mlp" -> 3, torchvision's "encoder.layers.encoder_layer_3.mlp.0" -> 3);
    -1 when there is none."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else -1


def _param_entry(name, shape, tp_split_dim, tp, matrix, view=None):
    """One param of the param list. shape: the tensor's own (any dims up to 8: a 0-D, 3-D or 4-D
    one is planned as [numel] for AdamW, or as `view`, its declared rows x cols matrix view, for
    the matrix optimizer; checkpoints keep the own shape)."""
    if not isinstance(name, str) or not name:
        raise ValueError("canzona.plan: model: a param name must be a non-empty str "
                         f"(got {name!r})")
    shape = [int(s) for s in shape]
    if len(shape) > _MAX_TENSOR_DIMS:
        raise ValueError(f"canzona.plan: model: param '{name}' has {len(shape)} dims; at most "
                         f"{_MAX_TENSOR_DIMS}")
    if tp_split_dim not in (-1, 0, 1):
        raise ValueError(f"canzona.plan: model: param '{name}': tp_split_dim must be -1, 0 or 1 "
                         f"(got {tp_split_dim!r})")
    if matrix and len(shape) != 2 and view is None:
        raise ValueError(f"canzona.plan: model: param '{name}' has {len(shape)} dims "
                         f"{tuple(shape)}; the matrix optimizer needs its 2-D view: give "
                         "matrix_view=lambda name, p: p.flatten(1) if p.dim() == 4 else None (or "
                         "similar), or leave it to AdamW")
    entry = {"name": name, "shape": shape, "tp_split_dim": tp_split_dim, "layer": _layer_of(name)}
    if view is not None:
        entry["matrix_view"] = list(view)
    if matrix is not None:
        entry["optimizer"] = "matrix" if matrix else "elementwise"
    return entry


def _view_of(name, shape, matrix_view, item):
    """The rows x cols matrix_view(name, item) declares for a param of `shape` (None: none)."""
    view = matrix_view(name, item)
    if view is None:
        return None
    dims = tuple(view.shape) if hasattr(view, "shape") else view
    try:
        dims = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        raise ValueError(f"canzona.plan: matrix_view: param '{name}': expected a 2-D tensor or "
                         f"(rows, cols), got {view!r}"[:300]) from None
    numel = math.prod(int(s) for s in shape)
    if len(dims) != 2 or math.prod(dims) != numel:
        raise ValueError(f"canzona.plan: matrix_view: param '{name}' of shape {tuple(shape)} "
                         f"({numel} elements) got the view {dims}; it must be 2-D with as many "
                         "elements")
    return dims


def _from_tensor(name, tensor, tp, matrix, view=None):
    """A named tensor: Megatron TP attributes mean the tensor is one TP shard (global = local x tp
    along partition_dim)."""
    shape = list(tensor.shape)
    split = -1
    if getattr(tensor, _TP_ATTR, False):
        split = int(getattr(tensor, _DIM_ATTR, 0))
        if len(shape) not in (1, 2) or view is not None:
            raise ValueError(f"canzona.plan: model: param '{name}' of shape {tuple(shape)} is "
                             "tensor-parallel; only 1-D and 2-D params may be split over TP")
        if split not in (0, 1) or split >= max(len(shape), 1):
            raise ValueError(f"canzona.plan: model: param '{name}': partition_dim {split} does "
                             f"not index its shape {tuple(shape)}")
        shape[split] *= tp
    return _param_entry(name, shape, split, tp, matrix, view)


def _elementwise_by_module(module):
    """Params of embedding modules get the element-wise optimizer (Megatron's rule by module)."""
    import torch  # a Module was given, so torch is loaded already

    ids = set()
    for m in module.modules():  # torch's and canzona.torch.VocabParallelEmbedding
        if isinstance(m, torch.nn.Embedding) or getattr(m, "is_embedding", False):
            ids.update(id(p) for p in m.parameters(recurse=False))
    return ids


def _matrix_and_view(pname, shape, item, is_matrix, matrix_view, embedding):
    """Whether a param gets the matrix optimizer (None: the planner's default rule) and its
    declared view: is_matrix decides when given; a param not 2-D gets AdamW unless matrix_view
    declares its 2-D view (then the matrix optimizer, unless is_matrix says no)."""
    matrix = bool(is_matrix(pname, item)) if is_matrix is not None else \
        (False if embedding else None)
    view = None
    if len(shape) != 2 and matrix_view is not None and matrix is not False:
        view = _view_of(pname, shape, matrix_view, item)
        if view is not None and matrix is None:
            matrix = True
    return matrix, view


def _params_doc(items, tp, is_matrix, name, embedding_ids=frozenset(), matrix_view=None):
    """The param-list document of (name, tensor) or (name, shape[, tp_split_dim]) items."""
    params = []
    for i, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ValueError(f"canzona.plan: model[{i}]: expected (name, tensor) or (name, shape, "
                             f"tp_split_dim), got {item!r}"[:300])
        pname = item[0]
        if len(item) == 2 and hasattr(item[1], "shape"):
            tensor = item[1]
            matrix, view = _matrix_and_view(pname, tuple(tensor.shape), tensor, is_matrix,
                                            matrix_view, id(tensor) in embedding_ids)
            params.append(_from_tensor(pname, tensor, tp, matrix, view))
        else:
            shape = item[1]
            split = item[2] if len(item) == 3 else -1
            if isinstance(shape, int):
                shape = [shape]
            matrix, view = _matrix_and_view(pname, tuple(shape), tuple(shape), is_matrix,
                                            matrix_view, False)
            params.append(_param_entry(pname, shape, split, tp, matrix, view))
    if not params:
        raise ValueError("canzona.plan: model has no params")
    return {"name": name or "model", "params": params}


# The model_type values of Hugging Face configs that `canzona plan --model config.json` reads.
HF_MODEL_TYPES = ("qwen3", "qwen3_moe", "qwen2", "llama", "mistral")


def hf_config_of(model):
    """The transformers config of a Hugging Face model whose architecture the planner models
    (model.config.model_type in HF_MODEL_TYPES), else None."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) in HF_MODEL_TYPES and \
            callable(getattr(config, "to_json_string", None)):
        return config
    return None


def _plan_hf_config(config, name, args):
    """The plan JSON of `canzona plan --model DIR/config.json` for the config save_pretrained
    writes; DIR is named `name` (the CLI names a config's model after its directory)."""
    with tempfile.TemporaryDirectory(prefix="canzona-hf-") as tmp:
        folder = os.path.join(tmp, name)
        os.mkdir(folder)
        path = os.path.join(folder, "config.json")
        with open(path, "w") as f:
            f.write(config.to_json_string(use_diff=False))
        return _canzona.plan_json(path, args)


def _model_doc(model, tp, is_matrix, name, matrix_view=None):
    """The param-list document (the CLI's --model param-list format) of `model`, or the str."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, dict):
        return model
    embedding_ids = frozenset()
    if hasattr(model, "named_parameters") and callable(model.named_parameters):
        embedding_ids = _elementwise_by_module(model)
        if name is None:
            name = type(model).__name__
        items = list(model.named_parameters())
    else:
        try:
            items = list(model)
        except TypeError:
            raise TypeError("canzona.plan: model must be a torch.nn.Module, named_parameters(), a "
                            "list of (name, shape, tp_split_dim), a dict param list, or a str "
                            f"(preset, config.json); got {type(model).__name__}") from None
    return _params_doc(items, tp, is_matrix, name, embedding_ids, matrix_view)


class Plan:
    """One plan: its balance metrics, each param's DP owner, each matrix task's host, the micro
    groups, and the document `canzona plan --json` writes (to_json())."""

    def __init__(self, doc):
        self._doc = doc
        self._owner = {}
        self._bucket = {}
        for stage in doc["stages"]:
            for b, bucket in enumerate(stage["buckets"]):
                for p in bucket["params"]:
                    self._owner[p["name"]] = p["owner"]
                    self._bucket[p["name"]] = b
        self._tasks = [t for stage in doc["stages"] for t in stage["tasks"]]

    plan_hash = property(lambda self: self._doc["plan_hash"], doc="the CLI's plan_hash")
    strategy = property(lambda self: self._doc["strategy"])
    dp = property(lambda self: self._doc["dp"])
    tp = property(lambda self: self._doc["tp"])
    balance = property(lambda self: self._doc["balance"],
                       doc="max/mean per axis: {'dp'|'tp'|'grid': {'flops', 'memory'}}")
    lower_bound = property(lambda self: self._doc["lower_bound"])
    plan_ms = property(lambda self: self._doc["plan_ms"])
    tasks = property(lambda self: list(self._tasks),
                     doc="matrix tasks: name, shape, dp_owner, host (TP rank, -1 all), group, cost")
    micro_groups = property(
        lambda self: [g for s in self._doc["stages"] for g in s["micro_groups"]])
    buckets = property(lambda self: self._doc["buckets"])

    def owner(self, name):
        """The DP rank that owns param `name`: an int, 'divided' (element-wise, cut between
        ranks) or 'all' (every rank steps it)."""
        try:
            return self._owner[name]
        except KeyError:
            raise KeyError(f"no param named {name!r} in the plan") from None

    def bucket(self, name):
        if name not in self._bucket:
            raise KeyError(f"no param named {name!r} in the plan")
        return self._bucket[name]

    def host(self, name):
        """The TP rank that computes the update of matrix task `name` (-1: every TP rank)."""
        for t in self._tasks:
            if t["name"] == name:
                return t["host"]
        raise KeyError(f"no matrix task named {name!r} in the plan")

    def to_json(self, indent=None):
        return json.dumps(self._doc, indent=indent)

    def __repr__(self):
        b = self.balance
        return (f"<canzona.Plan {self.strategy} dp={self.dp} tp={self.tp} "
                f"DP FLOPs max/mean {b['dp']['flops']:.3f} plan_hash {self.plan_hash:#018x}>")


def _make_args(where, *, dp, tp, pp, optimizer, strategy, planner, cost, bucket_size, alpha,
               cmax_mb, zero_stage, split_qkv, split_fc1, layerwise_tp, layerwise_buckets,
               bucket_order, ns_steps=None, precondition_frequency=None, max_precond_dim=None,
               calibration=None, ep=1, etp=1, precision="fp32", grad_reduce_in_fp32=False,
               ns_dtype=None, ns_algorithm=None):
    """The native PlanArgs of the planning options; TypeError for a mistyped one."""
    args = _canzona.PlanArgs()
    ints = {"dp": dp, "tp": tp, "pp": pp, "ep": ep, "etp": etp, "zero_stage": zero_stage, "bucket_size": bucket_size}
    for key, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}: {key} must be an int (got {value!r})")
    strs = {"optimizer": optimizer, "strategy": strategy, "planner": planner, "cost": cost,
            "split_qkv": split_qkv, "layerwise_tp": layerwise_tp,
            "layerwise_buckets": layerwise_buckets, "bucket_order": bucket_order,
            "precision": precision}
    for key, value in strs.items():
        if not isinstance(value, str):
            raise TypeError(f"{where}: {key} must be a str (got {value!r})")
    for key, value in {**ints, **strs}.items():
        setattr(args, key, value)
    args.split_fc1 = bool(split_fc1)
    if not isinstance(grad_reduce_in_fp32, bool):
        raise TypeError(f"{where}: grad_reduce_in_fp32 must be a bool (got "
                        f"{grad_reduce_in_fp32!r})")
    args.grad_reduce_in_fp32 = grad_reduce_in_fp32
    args.alpha = float(alpha)
    args.cmax_mb = float(cmax_mb)
    if ns_steps is not None:
        args.ns_steps = int(ns_steps)
    if precondition_frequency is not None:
        args.precondition_frequency = int(precondition_frequency)
    if max_precond_dim is not None:
        args.max_precond_dim = int(max_precond_dim)
    if calibration is not None:
        args.calibration = os.fspath(calibration)
    for key, value in {"ns_dtype": ns_dtype, "ns_algorithm": ns_algorithm}.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise TypeError(f"{where}: {key} must be a str (got {value!r})")
        known = ("fp32", "bf16") if key == "ns_dtype" else ("standard", "gram")
        if value not in known:
            raise ValueError(f"{where}: {key} must be {' or '.join(repr(k) for k in known)} "
                             f"(got {value!r})")
        setattr(args, key, value)
    if tp < 1:
        raise ValueError(f"{where}: tp must be >= 1 (got {tp})")
    return args


def strategies():
    """The strategies, in design order, as the planner's strategy table lists them: a list of dicts
    with 'name' (what `strategy=` takes), 'about' (one line), 'zero3' (whether it runs under
    zero_stage=3) and 'compute_share' ('none': every rank computes every update; 'dp': the DP ranks
    share the work, every TP rank computes whole matrices; 'grid': each matrix once on DP x TP)."""
    return [dict(row) for row in _canzona.strategies()]


def plan(model, *, dp=1, tp=1, pp=1, ep=1, etp=1, optimizer="muon", strategy="lb-asc", planner="canzona",
         cost="flops", bucket_size=0, alpha=1.0, cmax_mb=512.0, zero_stage=1, split_qkv="none",
         split_fc1=False, layerwise_tp="duplicated", layerwise_buckets="soft-min",
         bucket_order="free", ns_steps=None, precondition_frequency=None, max_precond_dim=None,
         calibration=None, is_matrix=None, matrix_view=None, name=None, precision="fp32",
         grad_reduce_in_fp32=False, ns_dtype=None, ns_algorithm=None):
    """Plans `model` as `canzona plan` does (the same options, named as its flags with '_').

    ns_dtype "fp32" | "bf16" and ns_algorithm "standard" | "gram" (--ns-dtype, --ns-algorithm):
    Muon's Newton-Schulz options; the Gram iteration's FLOPs are what the plan balances on the
    shapes where it runs. None: Muon's defaults (fp32, standard).

    precision "fp32" | "bf16" (--precision): the dtype of params and gradients the plan's memory
    and communication are priced at (bf16: 2-byte params and gradients, fp32 main params and
    optimizer state); grad_reduce_in_fp32 (--grad-reduce-in-fp32) keeps bf16 runs' gradients in
    fp32.

    ep and etp (expert parallelism and expert TP) apply to a mixture-of-experts model: its expert
    params (names with '.mlp.experts.<e>.' or Megatron's '.mlp.experts.local_experts.<e>.') go in
    a second buffer planned over expert DP = dp * tp / (ep * etp) ranks, as Megatron keeps them;
    the Plan's balance then has an 'expert' entry.

    model: a torch.nn.Module, its named_parameters(), a list of (name, shape, tp_split_dim), a
    param-list dict, or a str the CLI's --model takes (preset name, HF config.json, param list).
    Params tagged with Megatron's `tensor_model_parallel`/`partition_dim` are TP shards: their
    full shape is the local one times tp along partition_dim. Layers are the first numeric
    component of a name (or of a word ending in 'layer_<n>'). 2-D params get the matrix optimizer
    except embeddings (nn.Embedding, names with 'embedding', 'output_layer', 'router');
    is_matrix(name, tensor_or_shape) overrides. Params of any other rank (0-D scales, 3-D position
    tables and class tokens, 4-D conv filters) get AdamW, planned as [numel]; matrix_view(name,
    tensor_or_shape) -> a 2-D tensor (e.g. p.flatten(1)), (rows, cols) or None declares the
    row-major matrix view under which such a param gets the matrix optimizer instead (unless
    is_matrix says no): planned, costed and stepped in that shape (its optimizer state
    checkpointed in it), the param itself kept and checkpointed in its own.
    A Hugging Face transformers model of a planned architecture (model.config.model_type one of
    HF_MODEL_TYPES: Qwen3, Qwen3-MoE, Qwen2, Llama, Mistral) is planned from its config, as
    `canzona plan --model config.json` plans what save_pretrained writes (Megatron's layout: fused
    QKV, gate/up as one fc1), named `name` (default: the class name); pass
    model.named_parameters() to plan its own params instead.
    Raises ValueError naming the bad argument or param; TypeError for unknown keywords.
    """
    args = _make_args("canzona.plan", dp=dp, tp=tp, pp=pp, ep=ep, etp=etp, optimizer=optimizer,
                      strategy=strategy, planner=planner, cost=cost, bucket_size=bucket_size,
                      alpha=alpha, cmax_mb=cmax_mb, zero_stage=zero_stage, split_qkv=split_qkv,
                      split_fc1=split_fc1, layerwise_tp=layerwise_tp,
                      layerwise_buckets=layerwise_buckets, bucket_order=bucket_order,
                      ns_steps=ns_steps, precondition_frequency=precondition_frequency,
                      max_precond_dim=max_precond_dim, calibration=calibration,
                      precision=precision, grad_reduce_in_fp32=grad_reduce_in_fp32,
                      ns_dtype=ns_dtype, ns_algorithm=ns_algorithm)
    hf_config = hf_config_of(model) if is_matrix is None and matrix_view is None else None
    doc = None if hf_config is not None else _model_doc(model, tp, is_matrix, name, matrix_view)
    if hf_config is not None:
        name = name or type(model).__name__
        if not isinstance(name, str) or "/" in name or name in (".", ".."):
            raise ValueError(f"canzona.plan: name must be a file name for a Hugging Face model "
                             f"(got {name!r})")
    try:
        if hf_config is not None:
            text = _plan_hf_config(hf_config, name, args)
        else:
            text = _canzona.plan_json(doc, args)
    except ValueError as e:
        raise ValueError(f"canzona.plan: {e}") from None
    return Plan(json.loads(text))

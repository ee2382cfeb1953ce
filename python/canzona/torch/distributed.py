"""canzona.torch.DistributedOptimizer: Canzona's engine under a user's own torch.nn.Module.

Launched with `mpirun -np N .venv/bin/python script.py`. At construction the model's trainable params are
planned (canzona.plan's rules), laid into the engine's Megatron-layout buffers (param.data and
param.grad become views of them), DP rank 0's values are copied to every rank (as
DistributedDataParallel does) and hooks are put in place:

* after autograd accumulates a param's gradient, a hook marks it ready; when a bucket's last
  param is ready the engine posts the bucket's Reduce-Scatter (or All-Reduce) during backward;
* step() waits for those collectives, runs the optimizer on what this rank owns and posts the
  updated params' All-Gathers; the next forward waits for each bucket where it first reads one of
  its params (param_access.py).

zero_stage=3 keeps only this rank's shard of each bucket between uses: the forward gathers a
bucket where it first reads it (the next one prefetched) and releases it after its last read,
backward gathers it again where autograd first needs one of its params and releases it once all of
them have their gradients (param_access.py). Values are bitwise those of stage 1.

Inside `with opt.no_sync():` backward only accumulates (gradient accumulation, as DDP's no_sync).
"""
import atexit
import contextlib
import json
import math
import os
import re
import weakref

import torch

from canzona import _canzona
from canzona.planning import _elementwise_by_module, _make_args, _params_doc, hf_config_of
from canzona.torch import parallel
from canzona.torch.optim import group_lr, run_closure
from canzona.torch.param_access import ParamAccess

_LIVE = weakref.WeakSet()


def _close_all():
    for opt in list(_LIVE):
        opt.close(_at_exit=True)
    parallel.close()
    _canzona.mpi_finalize()


atexit.register(_close_all)

_MATRIX_KINDS = ("muon", "shampoo", "soap")


class DistributedOptimizer(torch.optim.Optimizer):
    """The engine under `model` (docs/python.md).

    optimizer: the matrix optimizer, "muon" | "shampoo" | "soap"; its options (Canzona's keys,
    docs/optimizers.md) in optimizer_options, its lr in `lr`; the other params get AdamW with
    adamw_options and `adamw_lr`. strategy: "lb-asc" | "asc" | "sc" | "layerwise" |
    "layerwise-paper" | "fsdp-a2a". The grid is canzona.torch.parallel's (made by
    parallel.init(tp=...) before a model with TP layers; else here, with tp=1 unless given, and dp
    the job's size / tp). Two param groups: the matrix params (lr) and the element-wise ones
    (adamw_lr); schedulers drive both.

    Params of any rank: 1-D and 0-D params, 3-D position tables and class tokens, 4-D conv
    filters get AdamW; is_matrix(name, param) -> bool overrides the choice, and matrix_view(name,
    param) -> a 2-D view (p.flatten(1) if p.dim() == 4 else None), (rows, cols) or None declares the row-major matrix under
    which a param that is not 2-D gets the matrix optimizer (canzona.plan's rules). zero_stage: 1
    (ZeRO-1: every rank keeps every param) or 3 (ZeRO-3: each rank keeps its shard of each bucket
    between uses; strategies asc, lb-asc, fsdp-a2a); under ZeRO-3 read params outside the model's
    forward inside `with opt.gathered():`.

    Mixture of experts: params marked as experts (Megatron's `param.allreduce = False`, which
    canzona.torch.moe.mark_experts sets, or expert_params(name, param) -> bool) are this EP rank's
    local experts, each named with its local index (`...experts.<i>....`); they go to a second
    engine over the grid's expert groups (parallel.init(ep=...)), as Megatron's expert buffer,
    their gradients averaged over the dense DP. Every EP rank must hold the same local expert
    names and shapes. In the plan and in checkpoints, local expert i of EP rank r is expert
    r * E / ep + i (E = ep x the local experts); experts_per_token (the router's top-k) prices
    them in the plan.

    Precision: a model cast to torch.bfloat16 (every trained param; model.to(torch.bfloat16))
    gets bf16 param and gradient buffers with fp32 main params and fp32 optimizer state (the
    update is applied to the main copy, the bf16 param re-cast from it), at any TP, with experts,
    under ZeRO-1 and ZeRO-3. Gradients are reduced in bf16; grad_reduce_in_fp32=True (Megatron's
    name) keeps the gradient buffer in fp32: then param.grad is None after backward and
    param.main_grad (fp32, a view of the buffer) receives every backward's bf16 gradient, summed
    in fp32 (the synced backward then scales and reduces it in place). No effect on a float32
    model.

    collective_timeout: seconds any collective or message of this process may take (Megatron's
    --distributed-timeout-minutes, torch.distributed's timeout); past it the process prints one
    line naming the operation and the ranks it waited for, and exits with status 2.
    """

    def __init__(self, model, optimizer="muon", strategy="lb-asc", *, lr=0.02, adamw_lr=1e-3,
                 optimizer_options=None, adamw_options=None, dp=None, tp=None, bucket_size=0,
                 planner="canzona", cost="flops", split_fc1=False, layerwise_tp="duplicated",
                 layerwise_buckets="soft-min", bucket_order="free", alpha=1.0, cmax_mb=512.0,
                 pipeline=True, overlap_param_gather=True, broadcast=True, is_matrix=None,
                 matrix_view=None, zero_stage=1, expert_params=None, experts_per_token=1,
                 collective_timeout=600.0, grad_reduce_in_fp32=False):
        if not isinstance(model, torch.nn.Module):
            raise TypeError("DistributedOptimizer: model must be a torch.nn.Module, got "
                            f"{type(model).__name__}")
        if optimizer not in _MATRIX_KINDS:
            raise ValueError(f"DistributedOptimizer: optimizer must be one of {_MATRIX_KINDS} "
                             f"(got {optimizer!r}); AdamW runs the element-wise params")
        for key, value in (("optimizer_options", optimizer_options),
                           ("adamw_options", adamw_options)):
            if value is not None and not isinstance(value, dict):
                raise TypeError(f"DistributedOptimizer: {key} must be a dict (got {value!r})")
            if value and "lr" in value:
                raise ValueError(f"DistributedOptimizer: {key}: give the learning rate as "
                                 f"{'lr' if key == 'optimizer_options' else 'adamw_lr'}")
        for key, value in (("lr", lr), ("adamw_lr", adamw_lr)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value < 0:
                raise ValueError(f"DistributedOptimizer: {key} must be a finite number >= 0 "
                                 f"(got {value!r})")
        if isinstance(collective_timeout, bool) or \
                not isinstance(collective_timeout, (int, float)) or \
                not math.isfinite(collective_timeout) or not 0 < collective_timeout <= 7 * 24 * 3600:
            raise ValueError("DistributedOptimizer: collective_timeout must be a number of seconds "
                             f"in (0, 604800] (got {collective_timeout!r})")
        if not isinstance(grad_reduce_in_fp32, bool):
            raise TypeError("DistributedOptimizer: grad_reduce_in_fp32 must be a bool (got "
                            f"{grad_reduce_in_fp32!r})")
        if isinstance(zero_stage, bool) or zero_stage not in (1, 3):
            raise ValueError(f"DistributedOptimizer: zero_stage must be 1 or 3 (got "
                             f"{zero_stage!r})")
        for key, fn in (("is_matrix", is_matrix), ("matrix_view", matrix_view),
                        ("expert_params", expert_params)):
            if fn is not None and not callable(fn):
                raise TypeError(f"DistributedOptimizer: {key} must be callable(name, param) "
                                f"(got {fn!r})"[:200])
        _canzona.set_collective_timeout(float(collective_timeout))
        try:
            if tp is None and parallel._GRID is not None:
                grid = parallel.grid()
            else:
                grid = parallel.init(tp=1 if tp is None else tp, dp=dp)
        except ValueError as e:
            raise ValueError(str(e).replace("canzona.torch.parallel.init:",
                                            "DistributedOptimizer:")) from None
        if dp is not None and dp != grid.dp:
            raise ValueError(f"DistributedOptimizer: dp {dp} but the parallel grid has dp "
                             f"{grid.dp}")
        dp, tp = grid.dp, grid.tp
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("DistributedOptimizer: the model has no trainable params")
        for name, p in named:
            _check_param(name, p)
        # One dtype for every trained param: float32, or bfloat16 (bf16 buffers with fp32 main
        # params and optimizer state; docs/precision.md).
        first_name, first = named[0]
        for name, p in named:
            if p.dtype != first.dtype:
                raise ValueError(f"DistributedOptimizer: param '{name}' is {p.dtype} but "
                                 f"'{first_name}' is {first.dtype}; every trained param must "
                                 f"have one dtype (torch.float32 or torch.bfloat16)")
        self._bf16 = first.dtype == torch.bfloat16
        self._names = [n for n, _ in named]
        # A transformers model's config, which save() writes as config.json when every param of
        # the model is trained here (a frozen one would be missing from what from_pretrained reads).
        self._hf_config = hf_config_of(model)
        if self._hf_config is not None and not all(p.requires_grad for p in model.parameters()):
            self._hf_config = None
        self._model_class = type(model).__name__
        self._shapes = [tuple(p.shape) for _, p in named]
        is_expert = expert_params or (lambda _, p: getattr(p, "allreduce", True) is False)
        # The whole model's params (every EP rank's experts) and each of ours' index among them.
        self._index, items, num_experts = _whole_model(grid, named,
                                                       [bool(is_expert(n, p)) for n, p in named])
        try:
            doc = _params_doc(items, tp, is_matrix, type(model).__name__,
                              _elementwise_by_module(model), matrix_view)
        except ValueError as e:
            raise ValueError(str(e).replace("canzona.plan:", "DistributedOptimizer:")) from None
        if num_experts:
            if isinstance(experts_per_token, bool) or not isinstance(experts_per_token, int) or \
                    not 1 <= experts_per_token <= num_experts:
                raise ValueError(f"DistributedOptimizer: experts_per_token must be an int in "
                                 f"[1, {num_experts}] (got {experts_per_token!r})")
            doc["arch"] = {"num_experts": num_experts, "experts_per_token": experts_per_token}
        expert_grid = {"ep": grid.ep, "etp": grid.etp} if num_experts else {}
        args = _make_args("DistributedOptimizer", dp=dp, tp=tp, pp=1, **expert_grid,
                          optimizer=optimizer,
                          strategy=strategy, planner=planner, cost=cost, bucket_size=bucket_size,
                          alpha=alpha, cmax_mb=cmax_mb, zero_stage=zero_stage, split_qkv="none",
                          split_fc1=split_fc1, layerwise_tp=layerwise_tp,
                          layerwise_buckets=layerwise_buckets, bucket_order=bucket_order,
                          precision="bf16" if self._bf16 else "fp32",
                          grad_reduce_in_fp32=grad_reduce_in_fp32)
        # The kernels run with lr 1; each group's lr is its scale (1 x lr is lr exactly).
        matrix_options = dict(optimizer_options or {}, lr=1.0)
        elementwise_options = dict(adamw_options or {}, lr=1.0)
        try:
            engine = _canzona.DistributedEngine(grid, doc, args, json.dumps(matrix_options),
                                                json.dumps(elementwise_options), bool(pipeline))
        except ValueError as e:
            raise ValueError(f"DistributedOptimizer: {e}".replace(
                "--zero-stage 3:", "zero_stage=3:")) from None
        self._engine = engine
        self._plan = None
        # What a single-process replay needs (replay.py): the kernels and their options.
        self.kernel_settings = {"optimizer": optimizer, "optimizer_options": matrix_options,
                                "adamw_options": elementwise_options,
                                "precision": engine.precision,
                                "grad_reduce_in_fp32": engine.grad_precision != engine.precision,
                                "matrix_views": {e["name"]: tuple(e["matrix_view"])
                                                 for e in doc["params"] if "matrix_view" in e}}
        self._matrix = [engine.is_matrix(i) for i in self._index]
        self.matrix_param_names = [n for n, m in zip(self._names, self._matrix) if m]
        # param.data and param.grad become views of the engine's buffers; under
        # grad_reduce_in_fp32 (bf16 params, fp32 gradient buffer) param.main_grad does, and each
        # backward's bf16 param.grad is added into it and dropped (Megatron's main_grad).
        self._params = [p for _, p in named]
        self._main_grad = engine.grad_precision != engine.precision
        self._ptrs = []
        for i, p in zip(self._index, self._params):
            data = self._as_param(engine.param(i)).view(p.shape)
            data.copy_(p.detach())
            p.data = data
            self._ptrs.append(data.data_ptr())
            grad = _as_tensor(engine.grad(i), engine.grad_precision).view(p.shape)
            grad.zero_()
            if self._main_grad:
                p.grad = None
                p.main_grad = grad
            else:
                p.grad = grad
        if broadcast:
            engine.broadcast_params()
            # The rest of the module's state (frozen params, buffers), as DDP's broadcast.
            trained = {id(p) for p in self._params}
            rest = [t for _, t in model.named_parameters() if id(t) not in trained]
            rest += [t for _, t in model.named_buffers()]
            for t in rest:
                _broadcast(engine, t)
        engine.init_main_params()
        self._access = ParamAccess(engine, self._params, self._index)

        matrix = [p for p, m in zip(self._params, self._matrix) if m]
        elementwise = [p for p, m in zip(self._params, self._matrix) if not m]
        groups = []
        if matrix:
            groups.append({"params": matrix, "lr": float(lr), "kind": "matrix"})
        if elementwise:
            groups.append({"params": elementwise, "lr": float(adamw_lr), "kind": "elementwise"})
        super().__init__(groups, {})

        self._sync = True
        self._ready = [False] * len(self._params)
        self._overlap = bool(overlap_param_gather)
        self._accumulators = []
        for i, p in enumerate(self._params):
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._grad_hook(i))
            self._accumulators.append(acc)
        index = {id(p): i for i, p in enumerate(self._params)}
        access = self._access
        self._forward_hooks = [
            model.register_forward_pre_hook(lambda m, _: access.begin_forward(m.training))]
        try:  # torch 2: the hook runs even when the forward raises
            end = model.register_forward_hook(lambda *_: access.end_forward(), always_call=True)
        except TypeError:  # torch 1.13 has no always_call: a forward that raises is not ended
            end = model.register_forward_hook(lambda *_: access.end_forward())
        self._forward_hooks.append(end)
        for module in model.modules():
            own = [index[id(p)] for p in module.parameters(recurse=False) if id(p) in index]
            if own:
                buckets = sorted({engine.bucket_of(self._index[i]) for i in own})
                self._forward_hooks.append(module.register_forward_pre_hook(
                    self._wait_hook(own, buckets)))
        self._model = weakref.ref(model)
        self._known = {id(p) for _, p in model.named_parameters()}
        _LIVE.add(self)

    def _as_param(self, array):
        """A torch view of a param buffer array: float32, or the int16 bits of bf16 as bfloat16."""
        return _as_tensor(array, "bf16" if self._bf16 else "fp32")

    # Hooks ---------------------------------------------------------------------------------

    def _grad_hook(self, i):
        p = self._params[i]

        def hook(*_):
            if self._engine is None:
                return
            if self._main_grad and p.grad is not None:
                p.main_grad.add_(p.grad)  # widened to fp32 (exact), summed in fp32
                p.grad = None
            if not self._sync:
                self._access.accumulated(i)
                return
            if self._ready[i]:
                raise RuntimeError(f"DistributedOptimizer: param '{self._names[i]}' got a second "
                                   "gradient in one step; wrap the earlier backward passes in "
                                   "no_sync()")
            self._check_shape(i)
            self._ready[i] = True
            self._engine.grad_ready(self._index[i])
            self._access.accumulated(i)
            self._engine.progress()
        return hook

    def _wait_hook(self, own, buckets):
        def hook(*_):
            if self._engine is None:
                return
            for i in own:
                self._check_shape(i)
            self._access.ensure(buckets)
        return hook

    def _check_shape(self, i):
        p = self._params[i]
        if tuple(p.shape) != self._shapes[i] or p.data_ptr() != self._ptrs[i]:
            raise ValueError(f"DistributedOptimizer: param '{self._names[i]}' was resized or "
                             "replaced after construction")

    # torch.optim interface -----------------------------------------------------------------

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate gradients (no collective), as DDP's no_sync."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradient buffer; param.grad (param.main_grad under grad_reduce_in_fp32)
        stays a view of it (set_to_none is ignored)."""
        self._engine.zero_grads()

    @torch.no_grad()
    def step(self, closure=None):
        loss = run_closure(closure)
        model = self._model()
        if model is not None:
            for name, p in model.named_parameters():
                if id(p) not in self._known:
                    raise ValueError(f"DistributedOptimizer: param '{name}' was added after "
                                     "construction; make a new optimizer for the new model")
        missing = [n for n, r in zip(self._names, self._ready) if not r]
        if missing:
            what = "step() without a backward" if len(missing) == len(self._names) else \
                f"{len(missing)} of {len(self._names)} params got no gradient this step"
            raise ValueError(f"DistributedOptimizer: {what} (first: '{missing[0]}'); every "
                             "trainable param needs a gradient from the last backward outside "
                             "no_sync()")
        scales = {"matrix": 0.0, "elementwise": 0.0}
        for group in self.param_groups:
            scales[group["kind"]] = group_lr(group, f"DistributedOptimizer ({group['kind']} group)")
        self._engine.set_lr_scales(scales["matrix"], scales["elementwise"])
        if self._access.zero3:
            self._engine.finish()  # a prefetch backward did not use; every bucket released
            self._access.forget()
        self._engine.finish_grad_sync()
        self._engine.step()
        self._engine.start_param_sync()
        self._access.after_step()
        if not self._overlap:
            self.finish()
        self._ready = [False] * len(self._params)
        return loss

    def finish(self):
        """Waits for every param All-Gather in flight: afterwards the params are final (the next
        forward does this bucket by bucket). ZeRO-3: releases every gathered bucket."""
        if self._access.pending or self._access.zero3:
            self._engine.finish()
            self._access.forget()
            self._access.pending = False

    @contextlib.contextmanager
    def gathered(self):
        """Inside, every param holds its whole value (ZeRO-3 gathers every bucket and releases
        them on exit, nothing released in between, forwards included; stage 1 waits for the
        param sync): for reading params outside the model's forward. The params are views of the
        engine's buffer: copy what must outlive the block (e.g. {k: v.clone() for k, v in
        model.state_dict().items()}). Collective under ZeRO-3."""
        self.finish()
        self._access.gather_all()
        self._access.pinned += 1
        try:
            yield
        finally:
            self._access.pinned -= 1
            if not self._access.pinned:
                self._access.release_all()

    @property
    def zero_stage(self):
        return self._engine.zero_stage

    def memory_held(self, all_ranks=False):
        """Bytes this rank keeps between steps: params_bytes, grads_bytes,
        optimizer_state_bytes (main params and optimizer state) and resident_bytes (measured).
        all_ranks=True: a list of every DP rank's, in DP rank order (collective over DP)."""
        mine = self._engine.memory_held()
        if not all_ranks:
            return mine
        return [json.loads(b) for b in self._engine.all_gather_bytes(json.dumps(mine).encode())]

    @property
    def plan(self):
        """The canzona.Plan this optimizer runs."""
        if self._plan is None:
            from canzona.planning import Plan
            self._plan = Plan(json.loads(self._engine.plan_json()))
        return self._plan

    @property
    def step_count(self):
        """Optimizer steps taken (a loaded checkpoint's count included)."""
        return self._engine.step_count

    @property
    def dp_rank(self):
        return self._engine.dp_rank

    @property
    def tp_rank(self):
        return self._engine.tp_rank

    def params_hash(self):
        """FNV-1a of this rank's params in model order, equal on every rank after finish() (a MoE
        model's EP ranks hold other experts: their hashes folded in world rank order)."""
        self.finish()
        return self._engine.params_fnv()

    def state_dict(self):
        """This rank's optimizer state (what its plan makes it own), the step count, the param
        groups' hyperparameters and the plan's hash; load_state_dict takes it back on the same
        plan."""
        self.finish()
        state = [{"param": p, "state": s, "piece": piece, "begin": b, "end": e,
                  "values": torch.from_numpy(v).clone()}
                 for p, s, piece, b, e, v in self._engine.optimizer_state()]
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        return {"plan_hash": self.plan.plan_hash, "dp_rank": self.dp_rank,
                "precision": self._engine.precision,
                "step": self._engine.step_count, "state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        for key in ("plan_hash", "step", "state", "param_groups"):
            if key not in state_dict:
                raise ValueError(f"DistributedOptimizer.load_state_dict: missing key '{key}'")
        if state_dict["plan_hash"] != self.plan.plan_hash:
            raise ValueError("DistributedOptimizer.load_state_dict: the state was saved under "
                             f"plan {state_dict['plan_hash']:#x}, this optimizer runs "
                             f"{self.plan.plan_hash:#x} (same model, grid and strategy needed)")
        # State saved before the key existed is fp32's.
        if state_dict.get("precision", "fp32") != self._engine.precision:
            raise ValueError("DistributedOptimizer.load_state_dict: the state was saved by a "
                             f"{state_dict.get('precision', 'fp32')} model, this optimizer runs "
                             f"{self._engine.precision} params")
        if len(state_dict["param_groups"]) != len(self.param_groups):
            raise ValueError("DistributedOptimizer.load_state_dict: param group count differs")
        for entry in state_dict["state"]:
            self._engine.set_optimizer_state(entry["param"], entry["state"], entry["piece"],
                                             entry["begin"],
                                             entry["values"].detach().numpy().reshape(-1))
        self._engine.step_count = int(state_dict["step"])
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            group.update({k: v for k, v in saved.items() if k != "params"})

    def save(self, save_dir):
        """Writes the checkpoint save_dir/step-<N> (N = the steps taken) and returns its path.

        Collective: every rank calls it. The format is canzona train's (docs/checkpoints.md), in
        model space: model.safetensors holds every trained param under its name in
        model.named_parameters(), full (TP-unsharded) shape, in the params' dtype (F32 or BF16);
        optimizer.safetensors each matrix's optimizer state under its name and AdamW's state
        under each element-wise param's (a bf16 model's fp32 main params beside it, as
        '<name>.main'); config.json the model's param list (for a Hugging Face transformers
        model whose params are all trained, its config as save_pretrained writes it,
        architectures and torch_dtype included, and the param list in params.json, so
        from_pretrained(path) loads the trained weights); plan.json the plan; trainer.json the
        step, grid, strategy, optimizer, precision, the param groups' hyperparameters and every
        file's SHA-256.
        Written in a temporary directory renamed when complete, so a crash leaves the previous
        checkpoints as they were. Frozen params and buffers are not in it (they are not trained:
        the module's own state_dict keeps them); nor is an lr scheduler's state (its
        state_dict()). load() takes it back under any DP, TP, strategy and precision.
        """
        self.finish()
        groups = [{k: v for k, v in g.items() if k != "params" and _jsonable(v)}
                  for g in self.param_groups]
        # precision: a bf16 checkpoint's main params are read back by a bf16 load (the rule
        # for loading it under the other precision: docs/checkpoints.md).
        run = {"writer": "canzona.torch.DistributedOptimizer", "param_groups": groups,
               "optimizer_options": self.kernel_settings["optimizer_options"],
               "adamw_options": self.kernel_settings["adamw_options"],
               "precision": self._engine.precision,
               "grad_reduce_in_fp32": self.kernel_settings["grad_reduce_in_fp32"]}
        hf = ""
        if self._hf_config is not None:
            config = json.loads(self._hf_config.to_json_string(use_diff=False))
            if not config.get("architectures"):  # as save_pretrained records the class
                config["architectures"] = [self._model_class]
            # The dtype model.safetensors holds (from_pretrained's dtype="auto" keeps it):
            # transformers 5 reads "dtype" before "torch_dtype" (4.x's name); write both.
            config["dtype"] = config["torch_dtype"] = "bfloat16" if self._bf16 else "float32"
            hf = json.dumps(config, indent=2, sort_keys=True)
        return self._engine.save(os.fspath(save_dir), json.dumps(run), hf)

    def load(self, path):
        """Restores a checkpoint save() wrote (a step-<N> directory, or a save directory: its
        newest) and returns its directory. Collective. The params (param.data in place), the
        optimizer state, the step count and the param groups' hyperparameters come back; the
        checkpoint may come from another DP, TP or strategy (each rank reads only what its plan
        gives it) and another precision (a bf16 checkpoint into a float32 model: its BF16
        weights widened; a float32 one into a bf16 model: rounded, the main params the rounded
        weights). Raises ValueError on every rank, before anything changes, for a missing or
        corrupt checkpoint, another model (config.json names the first differing param) or
        another matrix optimizer.
        """
        self.finish()
        directory, _, run = self._engine.load(os.fspath(path))
        saved = {g.get("kind"): g for g in json.loads(run).get("param_groups", [])}
        for group in self.param_groups:
            group.update({k: v for k, v in saved.get(group["kind"], {}).items()
                          if k != "params"})
        self._ready = [False] * len(self._params)
        self._access.release_all()
        return directory

    def close(self, _at_exit=False):
        """Hands the engine back (the params keep their values as plain tensors; ZeRO-3 gathers
        them first, so close() is collective there)."""
        engine = getattr(self, "_engine", None)
        if engine is None:
            return
        try:
            self.finish()
            if not _at_exit:  # at exit a rank may be leaving alone: no new collectives
                self._access.gather_all()  # ZeRO-3: the whole values, copied below
        finally:
            for h in getattr(self, "_forward_hooks", []):
                h.remove()
            for p in self._params:
                p.data = p.data.clone()
                p.grad = None
                if self._main_grad:
                    del p.main_grad
            engine.close()
            self._engine = None
            _LIVE.discard(self)


_EXPERT_INDEX = re.compile(r"(^|\.)experts\.(local_experts\.)?(\d+)\.")


def _whole_model(grid, named, experts):
    """The params the plan holds: ours, each local expert param once per EP rank under its
    global index; returns (our params' indices among them, them as (name, tensor), the experts
    per MoE layer or 0). Collective over the world when there are experts: every rank checks
    that every rank holds the same local expert names and shapes (before any engine exists)."""
    if grid.ep == 0:
        first = next((n for (n, _), e in zip(named, experts) if e), None)
        if first is not None:
            raise ValueError(f"DistributedOptimizer: param '{first}' is an expert param "
                             "(allreduce=False or expert_params) but the parallel grid has no "
                             "expert groups: call canzona.torch.parallel.init(ep=...) before "
                             "making the model")
        return list(range(len(named))), named, 0
    local, problem = [], None
    for (name, p), e in zip(named, experts):
        m = _EXPERT_INDEX.search(name)
        if problem is None and e and m is None:
            problem = (f"expert param '{name}' has no local expert index in its name (a "
                       "component 'experts.<i>.', as nn.ModuleList names its experts)")
        elif problem is None and not e and m is not None:
            problem = (f"param '{name}' is named as an expert's ('experts.<i>.') but not marked "
                       "as one (allreduce=False or expert_params)")
        if e:
            local.append([name, list(p.shape)])
    if problem is None and local and grid.tp > 1:
        problem = (f"expert param '{local[0][0]}' under TP {grid.tp}: the experts run with TP 1 "
                   "(every TP rank would dispatch its DP rank's tokens again)")
    mine = json.dumps({"problem": problem, "experts": local})
    everyone = [json.loads(b) for b in grid.world_all_gather_bytes(mine.encode())]
    for r, theirs in enumerate(everyone):
        if theirs["problem"]:
            raise ValueError(f"DistributedOptimizer: {theirs['problem']} (world rank {r})")
    for r, theirs in enumerate(everyone):
        if theirs["experts"] != everyone[0]["experts"]:
            ours = dict(map(tuple, everyone[0]["experts"]))
            other = dict(map(tuple, theirs["experts"]))
            diff = next((n for n in ours if ours[n] != other.get(n)),
                        next(iter(set(other) - set(ours)), None))
            if diff is None:  # the same names and shapes in another order
                raise ValueError(f"DistributedOptimizer: the expert params differ across EP "
                                 f"ranks: world rank {r} holds them in another order than world "
                                 "rank 0 (every EP rank holds the same local experts)")
            raise ValueError(f"DistributedOptimizer: the expert params differ across EP ranks: "
                             f"'{diff}' is {ours.get(diff, 'absent')} on world rank 0 and "
                             f"{other.get(diff, 'absent')} on world rank {r} (every EP rank "
                             "holds the same local experts)")
    if not local:
        return list(range(len(named))), named, 0
    per_rank = 1 + max(int(_EXPERT_INDEX.search(n).group(3)) for n, _ in local)
    ep, ep_rank = grid.ep, grid.ep_rank
    index, items = [], []
    for (name, p), e in zip(named, experts):
        if not e:
            index.append(len(items))
            items.append((name, p))
            continue
        m = _EXPERT_INDEX.search(name)
        i = int(m.group(3))
        for r in range(ep):
            if r == ep_rank:
                index.append(len(items))
            items.append((name[:m.start(3)] + str(r * per_rank + i) + name[m.end(3):], p))
    return index, items, ep * per_rank


def _broadcast(engine, tensor):
    """DP rank 0's values of `tensor` in place on every DP rank."""
    with torch.no_grad():
        if tensor.dtype == torch.float32 and tensor.is_contiguous() and tensor.device.type == "cpu":
            engine.broadcast_floats(tensor.detach().view(-1).numpy())
        else:
            data = tensor.detach().cpu().contiguous()
            raw = engine.broadcast_bytes(data.view(-1).view(torch.uint8).numpy().tobytes())
            tensor.copy_(torch.frombuffer(bytearray(raw), dtype=data.dtype).view(data.shape))


def _as_tensor(array, precision):
    """A torch view of an engine buffer's array: float32, or bf16 (int16 bits) as bfloat16."""
    t = torch.from_numpy(array)
    return t.view(torch.bfloat16) if precision == "bf16" else t


def _jsonable(value):
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _check_param(name, p):
    if p.dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"DistributedOptimizer: param '{name}' is {p.dtype}; only torch.float32 "
                         f"or torch.bfloat16")
    if p.device.type != "cpu":
        raise ValueError(f"DistributedOptimizer: param '{name}' is on {p.device}; only CPU")
    if not p.is_contiguous():
        raise ValueError(f"DistributedOptimizer: param '{name}' is not contiguous")

"""Single-process torch.optim.Optimizers on Canzona's kernels: Muon, Shampoo, SOAP.

Each param's update runs in the C++ kernel (canzona._canzona.Optimizer) on the param's own
memory; its state lives in the kernel and `optimizer.state[p]` holds live tensor views of it under
PyTorch's names (Muon: momentum_buffer; SOAP/Shampoo: exp_avg, ...), plus "step". Learning-rate
schedulers work on param_groups[i]["lr"]; other hyperparameters may change between steps too.
"""
import json
import math

import torch

from canzona import _canzona

# torch.optim.Muon's default coefficients (Keller Jordan's), Canzona's "simple" set.
_SIMPLE = (3.4445, -4.775, 2.0315)


def _named(params):
    """params as torch.optim takes them, or (name, param) pairs: returns what torch.optim.Optimizer
    takes and a name for each param (for messages)."""
    if isinstance(params, torch.Tensor):
        raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                        "or dicts, but got " + torch.typename(params))
    params = list(params)
    names = {}
    out = []
    for i, item in enumerate(params):
        if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            names[id(item[1])] = item[0]
            out.append(item[1])
        elif isinstance(item, dict) and "params" in item:
            group = dict(item)
            ps = group["params"]
            ps = [ps] if isinstance(ps, torch.Tensor) else list(ps)
            plain = []
            for j, q in enumerate(ps):
                if isinstance(q, (tuple, list)) and len(q) == 2 and isinstance(q[0], str):
                    names[id(q[1])] = q[0]
                    plain.append(q[1])
                else:
                    plain.append(q)
            group["params"] = plain
            out.append(group)
        else:
            out.append(item)
    return out, names


def run_closure(closure):
    """torch.optim's step(closure): the closure's loss, computed with gradients on."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def group_lr(group, who):
    """A param group's lr as a float; ValueError unless finite and >= 0."""
    lr = group["lr"]
    lr = lr.item() if isinstance(lr, torch.Tensor) else lr
    if isinstance(lr, bool) or not (isinstance(lr, (int, float)) and math.isfinite(lr)
                                    and lr >= 0):
        raise ValueError(f"{who}: lr must be a finite number >= 0 (got {group['lr']!r})")
    return float(lr)


class _KernelOptimizer(torch.optim.Optimizer):
    """The shared part: one kernel instance per param, created at its first step."""

    _kernel = ""  # registry name
    _matrix_only = True
    _views = {}  # id(param) -> (rows, cols): the declared matrix of a param that is not 2-D

    def __init__(self, params, defaults):
        params, names = _named(params)
        super().__init__(params, defaults)
        self._names = names
        self._native = {}  # param -> (kernel, options json it was made with)
        self._shapes = {}
        for gi, group in enumerate(self.param_groups):
            self._native_options(group)  # every group's options are valid up front
            for pi, p in enumerate(group["params"]):
                self._check_param(p, f"param_groups[{gi}]['params'][{pi}]")
                self._shapes[p] = tuple(p.shape)

    def _label(self, p, where=None):
        name = self._names.get(id(p))
        return f"param '{name}'" if name else (where or f"param of shape {tuple(p.shape)}")

    def _check_param(self, p, where=None):
        label = self._label(p, where)
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"{type(self).__name__}: {label} is a {type(p).__name__}, not a Tensor")
        if p.dtype != torch.float32:
            raise ValueError(f"{type(self).__name__}: {label} is {p.dtype}; only torch.float32 "
                             "params are supported")
        if p.device.type != "cpu":
            raise ValueError(f"{type(self).__name__}: {label} is on {p.device}; only CPU tensors")
        if not p.is_contiguous():
            raise ValueError(f"{type(self).__name__}: {label} is not contiguous")
        if self._matrix_only and p.dim() != 2 and id(p) not in self._views:
            raise ValueError(f"{type(self).__name__}: {label} has shape {tuple(p.shape)}; "
                             f"{type(self).__name__} only supports 2-D params (give the others "
                             "to AdamW)")

    def _native_options(self, group):
        """The kernel's options of `group` as JSON text, lr left at 1 (the group's lr is applied
        as the kernel's lr scale, so schedulers need no rebuild: 1 x lr is lr exactly)."""
        raise NotImplementedError

    def _rows_cols(self, p):
        if id(p) in self._views:
            return self._views[id(p)]
        return (p.shape[0], p.shape[1]) if p.dim() == 2 else (1, p.numel())

    def _bind(self, p, kernel):
        state = self.state[p]
        for name, array in kernel.state():
            state[name] = torch.from_numpy(array)
        state["step"] = torch.tensor(float(kernel.step_count))

    def _kernel_for(self, p, group):
        options = self._native_options(group)
        current = self._native.get(p)
        if current is not None and current[1] == options:
            return current[0]
        rows, cols = self._rows_cols(p)
        name = self._names.get(id(p), f"param{tuple(p.shape)}")
        kernel = _canzona.Optimizer(self._kernel, name, rows, cols, options)
        if current is not None:  # hyperparameters changed: carry the state over, bit for bit
            old = current[0]
            for (n, new), (_, prev) in zip(kernel.state(), old.state()):
                new[...] = prev
            kernel.step_count = old.step_count
        self._native[p] = (kernel, options)
        self._bind(p, kernel)
        return kernel

    @torch.no_grad()
    def step(self, closure=None):
        loss = run_closure(closure)
        for group in self.param_groups:
            lr = group_lr(group, type(self).__name__)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if tuple(p.shape) != self._shapes.get(p, tuple(p.shape)):
                    raise ValueError(f"{type(self).__name__}: {self._label(p)} was resized from "
                                     f"{self._shapes[p]} to {tuple(p.shape)} after construction")
                self._check_param(p)
                grad = p.grad
                if grad.is_sparse:
                    raise ValueError(f"{type(self).__name__}: {self._label(p)} has a sparse grad")
                if grad.dtype != torch.float32 or grad.shape != p.shape:
                    raise ValueError(f"{type(self).__name__}: {self._label(p)}: grad is "
                                     f"{grad.dtype} {tuple(grad.shape)}, param "
                                     f"{p.dtype} {tuple(p.shape)}")
                grad = grad.contiguous()
                kernel = self._kernel_for(p, group)
                kernel.set_lr_scale(lr)
                kernel.step(p.detach().numpy(), grad.detach().numpy())
                self.state[p]["step"] = torch.tensor(float(kernel.step_count))
        return loss

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            for p in group["params"]:
                saved = self.state.get(p)
                if not saved:
                    continue
                saved = dict(saved)
                self._native.pop(p, None)
                kernel = self._kernel_for(p, group)
                for name, view in kernel.state():
                    if name not in saved:
                        raise ValueError(f"{type(self).__name__}.load_state_dict: "
                                         f"{self._label(p)}: state has no '{name}'")
                    value = torch.as_tensor(saved[name], dtype=torch.float32)
                    if tuple(value.shape) != view.shape:
                        raise ValueError(f"{type(self).__name__}.load_state_dict: "
                                         f"{self._label(p)}: state '{name}' has shape "
                                         f"{tuple(value.shape)}, expected {view.shape}")
                    view[...] = value.numpy()
                kernel.step_count = int(float(saved.get("step", 0)))
                self._bind(p, kernel)


def _betas(betas, cls):
    if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
        raise ValueError(f"{cls}: betas must be a pair (beta1, beta2), got {betas!r}")
    return float(betas[0]), float(betas[1])


def _check_options(kernel, options, cls):
    try:
        return _canzona.effective_options(kernel, json.dumps(options))
    except ValueError as e:
        raise ValueError(f"{cls}: {e}") from None


def _ns_dtype(value):
    """"fp32" | "bf16" from the name or torch.float32 / torch.bfloat16; ValueError otherwise."""
    if value is torch.float32 or value == "fp32":
        return "fp32"
    if value is torch.bfloat16 or value == "bf16":
        return "bf16"
    raise ValueError(f"Muon: ns_dtype must be 'fp32', 'bf16', torch.float32 or torch.bfloat16 "
                     f"(got {value!r})")


def _ns_algorithm(value):
    if value in ("standard", "gram"):
        return value
    raise ValueError(f"Muon: ns_algorithm must be 'standard' or 'gram' (got {value!r})")


class Muon(_KernelOptimizer):
    """Muon with torch.optim.Muon's arguments (PyTorch 2.9) on Canzona's kernel.

    ns_coefficients: torch's default triple (3.4445, -4.775, 2.0315), or one of Canzona's sets by
    name: "simple" (that triple), "quintic", "polar_express". adjust_lr_fn: None / "original"
    (sqrt(max(1, rows/cols)), torch's default) or "match_rms_adamw" (0.2 sqrt(max(rows, cols)),
    Moonlight's, Canzona's CLI default). Divides by ||U|| + eps (torch: max(||U||, eps)).

    ns_dtype: the precision of the Newton-Schulz products, "fp32" (default; also torch.float32)
    or "bf16" (torch.bfloat16: operands rounded to bf16, sums in fp32, as torch.optim.Muon's bf16
    matmuls; on oneDNN's bf16 matmul where the CPU has AMX or AVX512-BF16, else widened onto
    OpenBLAS). Momentum, the iterate between products, the update and the state stay fp32.
    ns_algorithm: "standard" (default) or "gram" (Gram Newton-Schulz with restarts, on the shapes
    where it saves FLOPs; docs/optimizers.md).
    """

    _kernel = "muon"

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=_SIMPLE, eps=1e-7, ns_steps=5, adjust_lr_fn=None,
                 ns_dtype="fp32", ns_algorithm="standard"):
        if isinstance(ns_coefficients, str):
            ns_set = ns_coefficients
        elif (isinstance(ns_coefficients, (tuple, list)) and len(ns_coefficients) == 3
              and all(abs(float(a) - b) < 1e-9 for a, b in zip(ns_coefficients, _SIMPLE))):
            ns_set = "simple"
        else:
            raise ValueError(f"Muon: ns_coefficients must be {_SIMPLE} or one of 'simple', "
                             f"'quintic', 'polar_express' (got {ns_coefficients!r})")
        if adjust_lr_fn in (None, "original"):
            scale = "aspect"
        elif adjust_lr_fn == "match_rms_adamw":
            scale = "spectral"
        else:
            raise ValueError("Muon: adjust_lr_fn must be None, 'original' or 'match_rms_adamw' "
                             f"(got {adjust_lr_fn!r})")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn, ns_dtype=_ns_dtype(ns_dtype),
                        ns_algorithm=_ns_algorithm(ns_algorithm), _ns_set=ns_set, _scale=scale)
        super().__init__(params, defaults)

    def _native_options(self, group):
        options = {"lr": 1.0, "momentum": float(group["momentum"]),
                   "nesterov": bool(group["nesterov"]), "ns_coefficients": group["_ns_set"],
                   "ns_steps": int(group["ns_steps"]), "eps": float(group["eps"]),
                   "scale": group["_scale"], "weight_decay": float(group["weight_decay"]),
                   "ns_dtype": _ns_dtype(group["ns_dtype"]),
                   "ns_algorithm": _ns_algorithm(group["ns_algorithm"])}
        _check_options("muon", options, "Muon")
        return json.dumps(options, sort_keys=True)


class Shampoo(_KernelOptimizer):
    """Shampoo (L^-1/4 G R^-1/4, roots refreshed every precondition_frequency steps, grafted to
    Adam by default) on Canzona's kernel; arguments as Canzona's --optimizer-options."""

    _kernel = "shampoo"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-12, weight_decay=0.0,
                 precondition_frequency=10, max_precond_dim=10000, grafting="adam",
                 graft_beta2=0.999, graft_eps=1e-8):
        beta1, beta2 = _betas(betas, "Shampoo")
        defaults = dict(lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay,
                        precondition_frequency=precondition_frequency,
                        max_precond_dim=max_precond_dim, grafting=grafting,
                        graft_beta2=graft_beta2, graft_eps=graft_eps)
        super().__init__(params, defaults)

    def _native_options(self, group):
        beta1, beta2 = _betas(group["betas"], "Shampoo")
        options = {"lr": 1.0, "beta1": beta1, "beta2": beta2, "eps": float(group["eps"]),
                   "weight_decay": float(group["weight_decay"]),
                   "precondition_frequency": int(group["precondition_frequency"]),
                   "max_precond_dim": int(group["max_precond_dim"]),
                   "grafting": group["grafting"], "graft_beta2": float(group["graft_beta2"]),
                   "graft_eps": float(group["graft_eps"])}
        _check_options("shampoo", options, "Shampoo")
        return json.dumps(options, sort_keys=True)


class SOAP(_KernelOptimizer):
    """SOAP (Adam in Shampoo's eigenbasis, Vyas et al. 2024) with the reference implementation's
    argument names, on Canzona's kernel."""

    _kernel = "soap"

    def __init__(self, params, lr=3e-3, betas=(0.95, 0.95), shampoo_beta=0.95, eps=1e-8,
                 weight_decay=0.01, precondition_frequency=10, max_precond_dim=10000,
                 correct_bias=True):
        beta1, beta2 = _betas(betas, "SOAP")
        defaults = dict(lr=lr, betas=(beta1, beta2), shampoo_beta=shampoo_beta, eps=eps,
                        weight_decay=weight_decay, precondition_frequency=precondition_frequency,
                        max_precond_dim=max_precond_dim, correct_bias=correct_bias)
        super().__init__(params, defaults)

    def _native_options(self, group):
        beta1, beta2 = _betas(group["betas"], "SOAP")
        options = {"lr": 1.0, "beta1": beta1, "beta2": beta2,
                   "shampoo_beta": float(group["shampoo_beta"]), "eps": float(group["eps"]),
                   "weight_decay": float(group["weight_decay"]),
                   "precondition_frequency": int(group["precondition_frequency"]),
                   "max_precond_dim": int(group["max_precond_dim"]),
                   "correct_bias": bool(group["correct_bias"])}
        _check_options("soap", options, "SOAP")
        return json.dumps(options, sort_keys=True)


class AdamW(_KernelOptimizer):
    """AdamW (decoupled weight decay) with torch.optim.AdamW's argument names and defaults, on
    Canzona's kernel: the element-wise optimizer every strategy runs, so a replay of a
    DistributedOptimizer's run on one process uses it for the non-matrix params. Any shape."""

    _kernel = "adamw"
    _matrix_only = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        beta1, beta2 = _betas(betas, "AdamW")
        super().__init__(params, dict(lr=lr, betas=(beta1, beta2), eps=eps,
                                      weight_decay=weight_decay))

    def _native_options(self, group):
        beta1, beta2 = _betas(group["betas"], "AdamW")
        options = {"lr": 1.0, "beta1": beta1, "beta2": beta2, "eps": float(group["eps"]),
                   "weight_decay": float(group["weight_decay"])}
        _check_options("adamw", options, "AdamW")
        return json.dumps(options, sort_keys=True)

"""canzona.torch.Muon / Shampoo / SOAP: torch.optim.Optimizers on Canzona's kernels."""
import io
import math

import pytest
import torch

import canzona.torch as ct

SIMPLE = (3.4445, -4.775, 2.0315)


def reference_muon(w, grads, lr, weight_decay, momentum, nesterov, ns_steps, eps, scale):
    """Muon as written in torch.optim.Muon's docs, in float64 on plain torch ops (the iteration on
    the wide orientation, X / (||X|| + eps), W <- W (1 - lr wd) - lr scale NS(U))."""
    w = w.double().clone()
    buf = torch.zeros_like(w)
    a, b, c = SIMPLE
    for g in grads:
        g = g.double()
        buf = buf + (1 - momentum) * (g - buf)
        u = g + momentum * (buf - g) if nesterov else buf
        x = u.T if u.shape[0] > u.shape[1] else u
        x = x / (x.norm() + eps)
        for _ in range(ns_steps):
            A = x @ x.T
            x = a * x + (b * A + c * A @ A) @ x
        if u.shape[0] > u.shape[1]:
            x = x.T
        w = w * (1 - lr * weight_decay) - lr * scale * x
    return w, buf


def grads_for(shape, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen) for _ in range(n)]


def run(opt_cls, w0, grads, **kwargs):
    w = torch.nn.Parameter(w0.clone())
    opt = opt_cls([w], **kwargs)
    for g in grads:
        w.grad = g.clone()
        opt.step()
    return w, opt


@pytest.mark.parametrize("shape", [(24, 16), (16, 40)])
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("adjust", [None, "match_rms_adamw"])
def test_muon_matches_a_float64_reference(shape, nesterov, adjust):
    w0 = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    grads = grads_for(shape, 4)
    w, opt = run(ct.Muon, w0, grads, lr=0.02, weight_decay=0.1, momentum=0.9, nesterov=nesterov,
                 adjust_lr_fn=adjust)
    rows, cols = shape
    scale = 0.2 * math.sqrt(max(rows, cols)) if adjust else math.sqrt(max(1, rows / cols))
    ref_w, ref_buf = reference_muon(w0, grads, 0.02, 0.1, 0.9, nesterov, 5, 1e-7, scale)
    assert (w.detach().double() - ref_w).abs().max() < 2e-5
    state = opt.state[w]
    assert (state["momentum_buffer"].double() - ref_buf).abs().max() < 1e-6
    assert state["step"].item() == 4
    assert state["momentum_buffer"].shape == shape


def test_muon_state_is_a_live_view_of_the_kernels_state():
    w, opt = run(ct.Muon, torch.ones(8, 8), grads_for((8, 8), 1))
    buf = opt.state[w]["momentum_buffer"]
    buf.zero_()  # a write goes into the kernel's buffer: the next step starts from zero momentum
    w2, opt2 = run(ct.Muon, w.detach().clone(), [])
    g = grads_for((8, 8), 1, seed=7)[0]
    w.grad, w2.grad = g.clone(), g.clone()
    opt.step()
    opt2.step()
    assert torch.equal(w, w2)


@pytest.mark.parametrize("cls,kwargs", [
    (ct.Muon, dict(lr=0.02)),
    (ct.Shampoo, dict(lr=0.01, precondition_frequency=2)),
    (ct.SOAP, dict(lr=0.01, precondition_frequency=2)),
])
def test_state_dict_round_trip_resumes_bitwise(cls, kwargs):
    shapes = [(12, 8), (8, 20)]
    w0 = [torch.randn(s, generator=torch.Generator().manual_seed(i)) for i, s in enumerate(shapes)]
    grads = [grads_for(s, 6, seed=10 + i) for i, s in enumerate(shapes)]

    def make(ws):
        return [torch.nn.Parameter(w.clone()) for w in ws]

    straight = make(w0)
    opt = cls(straight, **kwargs)
    for k in range(6):
        for p, g in zip(straight, grads):
            p.grad = g[k].clone()
        opt.step()

    first = make(w0)
    opt1 = cls(first, **kwargs)
    for k in range(3):
        for p, g in zip(first, grads):
            p.grad = g[k].clone()
        opt1.step()
    blob = io.BytesIO()
    torch.save({"params": [p.detach() for p in first], "opt": opt1.state_dict()}, blob)
    blob.seek(0)
    saved = torch.load(blob)
    second = make(saved["params"])
    opt2 = cls(second, **kwargs)
    opt2.load_state_dict(saved["opt"])
    for k in range(3, 6):
        for p, g in zip(second, grads):
            p.grad = g[k].clone()
        opt2.step()
    for a, b in zip(straight, second):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()
    assert opt2.state[second[0]]["step"].item() == 6
    for name, value in opt.state[straight[1]].items():
        assert torch.equal(value, opt2.state[second[1]][name]), name


@pytest.mark.parametrize("cls", [ct.Muon, ct.Shampoo, ct.SOAP])
def test_lr_schedulers_drive_the_kernels_lr_exactly(cls):
    w0 = torch.randn(10, 6, generator=torch.Generator().manual_seed(3))
    grads = grads_for((10, 6), 4)
    # LambdaLR halving every step against an optimizer whose lr is set by hand each step.
    a = torch.nn.Parameter(w0.clone())
    opt_a = cls([a], lr=0.04)
    sched = torch.optim.lr_scheduler.LambdaLR(opt_a, lambda s: 0.5 ** s)
    b = torch.nn.Parameter(w0.clone())
    opt_b = cls([b], lr=0.04)
    for k, g in enumerate(grads):
        a.grad, b.grad = g.clone(), g.clone()
        opt_b.param_groups[0]["lr"] = 0.04 * 0.5 ** k
        opt_a.step()
        opt_b.step()
        sched.step()
    assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()
    # lr 0 with no weight decay leaves the param unchanged; a nonzero lr does not.
    c = torch.nn.Parameter(w0.clone())
    opt_c = cls([c], lr=0.0, weight_decay=0.0)
    c.grad = grads[0].clone()
    opt_c.step()
    assert torch.equal(c.detach(), w0)
    assert not torch.equal(a.detach(), w0)


def test_changing_momentum_between_steps_keeps_the_state():
    w0 = torch.randn(6, 6, generator=torch.Generator().manual_seed(5))
    grads = grads_for((6, 6), 3)
    w = torch.nn.Parameter(w0.clone())
    opt = ct.Muon([w], lr=0.02, momentum=0.9, weight_decay=0.0)
    for k, g in enumerate(grads):
        if k == 2:
            opt.param_groups[0]["momentum"] = 0.5
        w.grad = g.clone()
        opt.step()
    # Reference: momentum 0.9 for two steps then 0.5, in float64.
    buf = torch.zeros(6, 6, dtype=torch.float64)
    for k, g in enumerate(grads):
        m = 0.9 if k < 2 else 0.5
        buf = buf + (1 - m) * (g.double() - buf)
    assert (opt.state[w]["momentum_buffer"].double() - buf).abs().max() < 1e-6
    assert opt.state[w]["step"].item() == 3


def test_params_without_grad_are_skipped_and_named_params_name_errors():
    a = torch.nn.Parameter(torch.ones(4, 4))
    b = torch.nn.Parameter(torch.ones(4, 4))
    opt = ct.Muon([("layer.a", a), ("layer.b", b)], lr=0.1)
    a.grad = torch.ones(4, 4)
    opt.step()
    assert b not in opt.state or not opt.state[b]
    assert torch.equal(b.detach(), torch.ones(4, 4))
    assert not torch.equal(a.detach(), torch.ones(4, 4))
    b.data = torch.ones(4, 5)
    b.grad = torch.ones(4, 5)
    with pytest.raises(ValueError, match=r"param 'layer.b' was resized from \(4, 4\) to \(4, 5\)"):
        opt.step()


@pytest.mark.parametrize("ns_dtype,ns_algorithm,low,high", [
    ("fp32", "gram", 0.0, 1e-4),           # the same polynomial, in fp32
    ("bf16", "standard", 1e-4, 1 / 32),    # bf16 products: torch.optim.Muon's bound
    (torch.bfloat16, "gram", 1e-4, 1 / 32),
])
def test_muon_newton_schulz_forms_stay_near_the_float64_reference(ns_dtype, ns_algorithm, low,
                                                                  high):
    """ns_dtype / ns_algorithm change the iteration's precision and form, not what it computes: each
    step's update stays within `high` of the float64 reference's (relative, Frobenius) and, with
    bf16 products, at least `low` from it (the option really reached the kernel). 40 x 16 runs the
    Gram iteration (2.5 : 1), 16 x 16 the standard one (no gain on a square)."""
    for shape in ((40, 16), (16, 16)):
        w0 = torch.randn(shape, generator=torch.Generator().manual_seed(1))
        grads = grads_for(shape, 1)
        w, _ = run(ct.Muon, w0, grads, lr=0.02, weight_decay=0.0, momentum=0.9,
                   adjust_lr_fn="match_rms_adamw", ns_dtype=ns_dtype, ns_algorithm=ns_algorithm)
        scale = 0.2 * math.sqrt(max(shape))
        ref_w, _ = reference_muon(w0, grads, 0.02, 0.0, 0.9, True, 5, 1e-7, scale)
        ours, want = w.detach().double() - w0.double(), ref_w - w0.double()
        rel = float((ours - want).norm() / want.norm())
        assert rel <= high, (shape, rel)
        if ns_dtype != "fp32":
            assert rel >= low, (shape, rel)


@pytest.mark.parametrize("make,match", [
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4, dtype=torch.float64))]), "float64"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(8, 4).t())]), "not contiguous"),
    (lambda: ct.Muon([("bias", torch.nn.Parameter(torch.ones(4)))]), "param 'bias' has shape"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], momentum=1.5), "momentum"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], ns_coefficients=(1, 2, 3)),
     "ns_coefficients"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], adjust_lr_fn="x"), "adjust_lr_fn"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], ns_dtype="fp16"), "ns_dtype"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], ns_dtype=torch.float16), "ns_dtype"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], ns_algorithm="fast"),
     "ns_algorithm"),
    (lambda: ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], ns_algorithm="gram", ns_dtype="bf16",
                     ns_coefficients="polar_express", ns_steps=8), "ns_algorithm': gram has no"),
    (lambda: ct.SOAP([torch.nn.Parameter(torch.ones(4, 4))], betas=(0.9,)), "betas"),
    (lambda: ct.Shampoo([torch.nn.Parameter(torch.ones(4, 4))], precondition_frequency=0),
     "precondition_frequency"),
])
def test_bad_input_raises_value_errors_naming_it(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_unknown_options_and_non_finite_grads():
    with pytest.raises(TypeError, match="unexpected keyword argument 'lrr'"):
        ct.Muon([torch.nn.Parameter(torch.ones(4, 4))], lrr=0.1)
    w = torch.nn.Parameter(torch.ones(4, 4))
    opt = ct.Muon([("w", w)])
    w.grad = torch.full((4, 4), float("nan"))
    with pytest.raises(RuntimeError, match="w"):
        opt.step()
    assert torch.equal(w.detach(), torch.ones(4, 4))  # param untouched

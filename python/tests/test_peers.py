"""canzona.torch.Muon beside PyTorch's own torch.optim.Muon (torch 2.9+), the same arguments.

torch runs the Newton-Schulz iteration in bfloat16, Canzona in float32, so the updates agree only
to bf16's precision. The bound, stated before measuring: the iteration starts from X rounded to
bf16 (relative error 2^-9 per element) and rounds the output of each of its 3 matrix products per
step to bf16 again, 5 steps: 16 roundings of 2^-9, a relative error of the update (Frobenius
norm) of at most 16 x 2^-9 = 1/32 if they added up in the worst case. Both runs also take the same
lr, weight decay and momentum, which are exact in both, so the bound covers the whole step.
"""
import pytest
import torch

import canzona.torch as ct

if not hasattr(torch.optim, "Muon"):
    pytest.skip(f"torch.optim.Muon needs torch 2.9+ (this is {torch.__version__})",
                allow_module_level=True)

BOUND = 16 * 2.0**-9


def grads_for(shape, steps, seed=7):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) for _ in range(steps)]


def run(cls, w0, grads, **kw):
    w = torch.nn.Parameter(w0.clone())
    opt = cls([w], **kw)
    updates = []
    for g in grads:
        before = w.detach().clone()
        w.grad = g.clone()
        opt.step()
        updates.append(w.detach() - before)
    return updates


@pytest.mark.parametrize("shape", [(64, 64), (96, 32), (32, 80)])
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("adjust", [None, "match_rms_adamw"])
@pytest.mark.parametrize("forms", [("fp32", "standard"), ("fp32", "gram"), ("bf16", "standard"),
                                   ("bf16", "gram")])
def test_muon_updates_match_torch_optim_muon_within_bf16s_bound(shape, nesterov, adjust, forms):
    """Every ns_dtype x ns_algorithm of ours (Gram runs on the 96 x 32 and 32 x 80 matrices) within
    the bound of torch's bf16 iteration."""
    w0 = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    grads = grads_for(shape, 3)
    kw = dict(lr=0.02, weight_decay=0.1, momentum=0.9, nesterov=nesterov, adjust_lr_fn=adjust)
    theirs = run(torch.optim.Muon, w0, grads, **kw)
    ours = run(ct.Muon, w0, grads, ns_dtype=forms[0], ns_algorithm=forms[1], **kw)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        rel = float((a.double() - b.double()).norm() / b.double().norm())
        assert rel <= BOUND, f"step {step}: relative difference {rel:.3e} > {BOUND:.3e}"
        # Not trivially close: the two do differ (torch's bf16 iterate against our fp32 one, or
        # our own bf16 products), and by more than fp32 would.
        assert rel > 1e-5, f"step {step}: {rel:.3e}"


def test_a_wrong_lr_scale_breaks_the_bound():
    """The negative control: Canzona's match_rms_adamw scale against torch's default differs by
    0.2 sqrt(96) / sqrt(96 / 32) = 1.13x on a 96 x 32 matrix, a relative difference of the update
    near 0.13 (a little less with the weight decay both apply alike): outside the bound."""
    shape = (96, 32)
    w0 = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    grads = grads_for(shape, 1)
    theirs = run(torch.optim.Muon, w0, grads, lr=0.02, adjust_lr_fn=None)
    ours = run(ct.Muon, w0, grads, lr=0.02, adjust_lr_fn="match_rms_adamw")
    rel = float((ours[0] - theirs[0]).norm() / theirs[0].norm())
    assert rel > 2 * BOUND

"""Canzona: exact distributed matrix optimizers (Muon, Shampoo, SOAP) for PyTorch users.

    import canzona
    plan = canzona.plan(model, dp=8, tp=2, optimizer="muon")   # docs/python.md
    import canzona.torch                                       # torch.optim optimizers

`import canzona` loads only the planner and the kernels (no torch); `canzona.torch` imports torch.
"""
from canzona._canzona import Optimizer as _NativeOptimizer  # noqa: F401  (checks the build)
from canzona._canzona import bf16_backend_report
from canzona.planning import Plan, plan, strategies

__version__ = "0.1.0"
__all__ = ["Plan", "plan", "strategies", "bf16_backend_report", "__version__"]

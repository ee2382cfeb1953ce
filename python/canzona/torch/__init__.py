"""canzona.torch: Canzona's optimizers behind PyTorch's interfaces (docs/python.md).

Muon, Shampoo and SOAP are single-process torch.optim.Optimizers on Canzona's kernels (the
same C++ code every distributed strategy runs).
"""
from canzona.torch.distributed import DistributedOptimizer
from canzona.torch.optim import SOAP, AdamW, Muon, Shampoo

__all__ = ["Muon", "Shampoo", "SOAP", "AdamW", "DistributedOptimizer"]

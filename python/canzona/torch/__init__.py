"""canzona.torch: Canzona's optimizers behind PyTorch's interfaces (docs/python.md).

Muon, Shampoo and SOAP are single-process torch.optim.Optimizers on Canzona's kernels (the
same C++ code every distributed strategy runs).
"""
from canzona.torch import moe, parallel
from canzona.torch.distributed import DistributedOptimizer
from canzona.torch.optim import SOAP, AdamW, Muon, Shampoo
from canzona.torch.tensor_parallel import (ColumnParallelLinear, RowParallelLinear,
                                           VocabParallelEmbedding, copy_shards,
                                           vocab_parallel_cross_entropy)

__all__ = ["Muon", "Shampoo", "SOAP", "AdamW", "DistributedOptimizer", "parallel", "moe",
           "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy", "copy_shards"]

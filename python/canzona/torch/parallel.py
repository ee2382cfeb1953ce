"""The DP x TP grid of an MPI job for canzona.torch (made before the model: TP layers shape their
params by their TP rank). Ranks are laid out as Megatron's: world rank = dp_rank x tp + tp_rank.

    import canzona.torch as ct
    ct.parallel.init(tp=2)          # dp = the job's size / tp
"""
from canzona import _canzona

_GRID = None


def init(tp=1, dp=None):
    """Makes the grid of this job once (MPI starts here); returns it. Calling it again with the
    same shape returns the same grid; another shape is a ValueError."""
    global _GRID
    for key, value in (("tp", tp), ("dp", dp)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"canzona.torch.parallel.init: {key} must be an int (got {value!r})")
    if tp < 1:
        raise ValueError(f"canzona.torch.parallel.init: tp must be >= 1 (got {tp})")
    world = _canzona.launched_world_size()
    if dp is None:
        dp = max(world // tp, 1)
    if _GRID is not None:
        if (_GRID.dp, _GRID.tp) != (dp, tp):
            raise ValueError(f"canzona.torch.parallel.init: the grid is dp {_GRID.dp} x tp "
                             f"{_GRID.tp} already; cannot make dp {dp} x tp {tp}")
        return _GRID
    try:
        _GRID = _canzona.ParallelGrid(dp, tp)
    except ValueError as e:
        raise ValueError(f"canzona.torch.parallel.init: {e}") from None
    return _GRID


def grid():
    """The grid, made with tp=1 on first use when init() was not called."""
    return _GRID if _GRID is not None else init()


def tp_size():
    return grid().tp


def tp_rank():
    return grid().tp_rank


def dp_rank():
    return grid().dp_rank


def close():
    global _GRID
    if _GRID is not None:
        _GRID.close()
        _GRID = None

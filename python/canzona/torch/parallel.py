"""The DP x TP grid of an MPI job for canzona.torch (made before the model: TP layers shape their
params by their TP rank, a MoE block its experts by its EP rank). Ranks are laid out as
Megatron's: world rank = dp_rank x tp + tp_rank.

    import canzona.torch as ct
    ct.parallel.init(tp=2)          # dp = the job's size / tp
    ct.parallel.init(ep=2)          # and Megatron's expert groups: EP 2, expert DP = dp x tp / 2

Expert groups (ep given): the dp x tp ranks, numbered l = dp_rank x tp + tp_rank, are also an
expert grid of expert DP x EP x expert TP with expert TP fastest: etp_rank = l % etp, ep_rank =
(l / etp) % ep, edp_rank = l / (etp x ep), so ep x etp must divide dp x tp.
"""
from canzona import _canzona

_GRID = None


def init(tp=1, dp=None, ep=None, etp=None):
    """Makes the grid of this job once (MPI starts here); returns it. ep (and etp, default 1)
    make Megatron's expert groups as well (a MoE model's experts need them). Calling it again
    with the same shape returns the same grid; another shape is a ValueError."""
    global _GRID
    for key, value in (("tp", tp), ("dp", dp), ("ep", ep), ("etp", etp)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"canzona.torch.parallel.init: {key} must be an int (got {value!r})")
    if tp < 1:
        raise ValueError(f"canzona.torch.parallel.init: tp must be >= 1 (got {tp})")
    if etp is not None and ep is None:
        raise ValueError("canzona.torch.parallel.init: etp needs ep (the expert groups)")
    for key, value in (("ep", ep), ("etp", etp)):
        if value is not None and value < 1:
            raise ValueError(f"canzona.torch.parallel.init: {key} must be >= 1 (got {value})")
    expert = (0, 1) if ep is None else (ep, 1 if etp is None else etp)
    world = _canzona.launched_world_size()
    if dp is None:
        dp = max(world // tp, 1)
    if _GRID is not None:
        made = (_GRID.ep, _GRID.etp if _GRID.ep else 1)
        if (_GRID.dp, _GRID.tp) != (dp, tp) or (ep is not None and made != expert):
            raise ValueError(f"canzona.torch.parallel.init: the grid is {_describe(_GRID)} "
                             f"already; cannot make dp {dp} x tp {tp}"
                             + ("" if ep is None else f", ep {expert[0]} x etp {expert[1]}"))
        return _GRID
    try:
        _GRID = _canzona.ParallelGrid(dp, tp, *expert)
    except ValueError as e:
        raise ValueError(f"canzona.torch.parallel.init: {e}") from None
    return _GRID


def _describe(g):
    text = f"dp {g.dp} x tp {g.tp}"
    return text + (f", ep {g.ep} x etp {g.etp}" if g.ep else "")


def grid():
    """The grid, made with tp=1 on first use when init() was not called."""
    return _GRID if _GRID is not None else init()


def tp_size():
    return grid().tp


def tp_rank():
    return grid().tp_rank


def dp_rank():
    return grid().dp_rank


def ep_size():
    """The EP group's size (1 on a grid without expert groups)."""
    return grid().ep or 1


def ep_rank():
    """This rank's EP rank (0 on a grid without expert groups)."""
    g = grid()
    return g.ep_rank if g.ep else 0


def close():
    global _GRID
    if _GRID is not None:
        _GRID.close()
        _GRID = None

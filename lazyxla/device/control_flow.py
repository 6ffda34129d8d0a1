"""torch.cond on lazyxla tensors.

PyTorch's dense kernel for the cond operator evaluates `if pred:` in Python. On a lazyxla
predicate that reads the value back to the host, and under torch.compile the bridge would record
only the branch taken while tracing: every later call would replay that branch whatever its
predicate. Here both branches are recorded and each output is selected by the predicate inside
the program, so the choice is made on every run (torch.cond's branches are functional, take the
same operands and return tensors of the same shapes and dtypes; the branch not taken computes
and is discarded). A predicate that is a Python bool or a CPU tensor picks its branch at once."""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

_installed = False


def _cond(pred, true_fn, false_fn, operands):
    if not (isinstance(pred, torch.Tensor) and pred.device.type == "lazyxla"):
        return true_fn(*operands) if pred else false_fn(*operands)
    when_true, when_false = true_fn(*operands), false_fn(*operands)
    flat_true, spec = pytree.tree_flatten(when_true)
    flat_false, spec_false = pytree.tree_flatten(when_false)
    if spec != spec_false:
        raise RuntimeError(f"torch.cond: the branches return different structures: {spec} and "
                           f"{spec_false}")
    chosen = pred.to(torch.bool)
    return pytree.tree_unflatten([_select(chosen, t, f) for t, f in zip(flat_true, flat_false)], spec)


def _select(chosen, when_true, when_false):
    if isinstance(when_true, torch.Tensor):
        return torch.where(chosen, when_true, when_false)
    if when_true != when_false:  # (an int output): a program cannot choose between two
        raise RuntimeError(f"torch.cond on lazyxla: the branches return different non-tensor "
                           f"values ({when_true!r} and {when_false!r})")
    return when_true


def install() -> None:
    global _installed
    if _installed:
        return
    from torch._higher_order_ops.cond import cond_op
    cond_op.py_impl(torch._C.DispatchKey.PrivateUse1)(_cond)
    _installed = True

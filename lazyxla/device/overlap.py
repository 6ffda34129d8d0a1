"""Eager's memory-overlap errors for writes through views.

A lazyxla write is functional, so writing into `x.expand(3, 4)` or adding `a[:-1]` into `a[1:]`
would compute something; eager refuses both, since its result would depend on the order the kernel
visits elements. Views report eager's strides and storage offsets (relative to their root buffer),
so eager's own rules apply: a written tensor that is provably self-overlapping (a stride 0 over
more than one element), or an input that partly overlaps the written tensor, is an error. Only
calls that read or write a view get here (kernels.py), so whole-buffer writes cost nothing."""
from __future__ import annotations

import torch

from lazyxla.ir.buffer import Buffer, state_of
from lazyxla.lowering.registry import mutated_args
from .fallback import lazy_tensors

_SELF = ("unsupported operation: more than one element of the written-to tensor refers to a single "
         "memory location. Please clone() the tensor before performing the operation.")
_PARTIAL = ("unsupported operation: some elements of the input tensor and the written-to tensor "
            "refer to a single memory location. Please clone() the tensor before performing the "
            "operation.")

# How eager's kernel checks its inputs against what it writes: not at all, for partial overlap
# (TensorIterator's rule: writing a tensor over itself is allowed), or for any overlap
# (at::assert_no_overlap: an input that is the written tensor too).
NONE, PARTIAL, ANY = 0, 1, 2
# In-place ops whose CPU kernels write without overlap checks (eager accepts them on an expanded
# tensor: every copy of an element receives the same value).
_UNCHECKED = frozenset(("fill_", "zero_", "masked_fill_", "index_fill_", "tril_", "triu_"))
# op name -> (whether the written tensor may not overlap itself, how inputs are checked), where
# eager's kernel differs from the default: an in-place op checks as TensorIterator does, an out=
# op as TensorIterator does where it is pointwise, else not at all. Measured against eager's CPU
# kernels on the OpInfo samples (tests/device/test_overlap.py).
_RULES = {
    "index_put_": (False, ANY), "_index_put_impl_": (False, ANY),  # (expanded: a warning)
    "mvlgamma": (True, NONE),  # out=: computed, then copied
    **{name: (True, ANY) for name in ("cat", "stack", "gather", "index_select", "take",
                                       "take_along_dim", "masked_select", "cross",
                                       "linalg_cross")},
    # out= overloads of ops that are not pointwise but check as TensorIterator does
    **{name: (True, PARTIAL) for name in ("addmm", "addmv", "addbmm", "baddbmm", "addr", "cumsum",
                                           "cumprod", "logcumsumexp", "softshrink", "hardshrink",
                                           "gelu", "softplus", "where", "scatter", "scatter_add",
                                           "scatter_reduce", "bernoulli", "sort", "renorm")},
}
_NO, _YES = 0, 1  # torch._debug_has_internal_overlap: 0 when non-overlapping and dense, 2 unknown


def rule(op) -> tuple[bool, int] | None:
    """(whether a written tensor that overlaps itself is an error, how inputs are checked) for
    this in-place or out= overload; None where eager checks nothing."""
    name = op._schema.name.split("::")[1]
    if name in _UNCHECKED:
        return None
    if name in _RULES:
        return _RULES[name]
    if any(a.is_out for a in op._schema.arguments):  # out=: the pointwise kernels (TensorIterator)
        return (True, PARTIAL) if torch.Tag.pointwise in op.tags else None
    return True, PARTIAL


def check(targets, args, kwargs, view_roots=None, rule=(True, PARTIAL)) -> None:
    """Raise eager's error if a written tensor overlaps itself or overlaps a tensor input (partly;
    or at all, where `rule` says so: `args` and `kwargs` are then the inputs alone, as
    `inputs_alone` gives them). `view_roots`: the roots of the views the call read (None: check
    every target). A written whole buffer none of whose views was read overlaps no input partly
    (an optimizer's foreach ops write whole buffers and read grads, views of other buffers: one
    lookup each)."""
    itself, inputs_rule = rule
    watched = None if view_roots is None else {id(r) for r in view_roots}
    inputs = None
    for t in targets:
        st = state_of(t)
        if itself and type(st) is not Buffer and torch._debug_has_internal_overlap(t) == _YES:
            raise RuntimeError(_SELF)
        root = st.root
        if inputs_rule == NONE or (watched is not None and id(root) not in watched):
            continue
        if inputs is None:
            inputs = [(a, state_of(a).root) for a in lazy_tensors((args, kwargs), [])]
        for a, r in inputs:
            if r is root and (_any(t, a) if inputs_rule == ANY else a is not t and _partial(t, a)):
                raise RuntimeError(_PARTIAL)


def inputs_alone(args, kwargs, positions, names):
    """The call's arguments without the ones it writes (schema `positions`; `names`: the schema's
    argument names): index_select(x, 0, i, out=x) reads x, which is also its out=."""
    written = {names[i] for i in positions}
    return ([a for i, a in enumerate(args) if i not in positions],
            {k: v for k, v in kwargs.items() if k not in written})


def check_call(op, args, kwargs) -> None:
    """check() for a call of a writing op that runs on the CPU (fallback.py): its host copies of
    views of one buffer no longer share memory, so eager's kernel cannot see their overlap."""
    r, positions = rule(op), mutated_args(op)
    if r is None or not positions:
        return
    names = [a.name for a in op._schema.arguments]
    targets = lazy_tensors([args[i] if i < len(args) else kwargs.get(names[i]) for i in positions], [])
    if r[1] == ANY:
        args, kwargs = inputs_alone(args, kwargs, positions, names)
    check(targets, args, kwargs, None, r)


def _dense_ranges(a, b):
    """The byte ranges (a0, a1, b0, b1) of two tensors on one root buffer, where eager compares
    them: both non-empty, non-overlapping and dense (else eager cannot tell, and lets it pass);
    None elsewhere."""
    if a.numel() == 0 or b.numel() == 0:
        return None
    if torch._debug_has_internal_overlap(a) != _NO or torch._debug_has_internal_overlap(b) != _NO:
        return None
    a0, b0 = a.storage_offset() * a.itemsize, b.storage_offset() * b.itemsize
    return a0, a0 + a.numel() * a.itemsize, b0, b0 + b.numel() * b.itemsize


def _any(a, b) -> bool:
    """eager's get_overlap_status(a, b) is Full or Partial."""
    r = _dense_ranges(a, b) if a is not b else (0, 1, 0, 1)
    return r is not None and r[0] < r[3] and r[2] < r[1]


def _partial(a, b) -> bool:
    """eager's get_overlap_status(a, b) == Partial."""
    r = _dense_ranges(a, b)
    if r is None:
        return False
    a0, a1, b0, b1 = r
    if a0 == b0 and a1 == b1:
        return a.stride() != b.stride()
    return a0 < b1 and b0 < a1

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
from .fallback import lazy_tensors

_SELF = ("unsupported operation: more than one element of the written-to tensor refers to a single "
         "memory location. Please clone() the tensor before performing the operation.")
_PARTIAL = ("unsupported operation: some elements of the input tensor and the written-to tensor "
            "refer to a single memory location. Please clone() the tensor before performing the "
            "operation.")

# In-place ops whose CPU kernels write without overlap checks (eager accepts them on an expanded
# tensor: every copy of an element receives the same value).
_UNCHECKED = frozenset(("fill_", "zero_", "masked_fill_", "index_fill_", "index_put_",
                        "_index_put_impl_", "tril_", "triu_"))
_NO, _YES = 0, 1  # torch._debug_has_internal_overlap: 0 when non-overlapping and dense, 2 unknown


def checked(op) -> bool:
    """Whether eager checks overlap for this in-place or out= overload."""
    name = op._schema.name.split("::")[1]
    if name in _UNCHECKED:
        return False
    if any(a.is_out for a in op._schema.arguments):  # out=: the pointwise kernels (TensorIterator)
        return torch.Tag.pointwise in op.tags
    return True


def check(targets, args, kwargs, view_roots=None) -> None:
    """Raise eager's error if a written tensor overlaps itself or partly overlaps a tensor input.
    `view_roots`: the roots of the views the call read (None: check every target). A written
    whole buffer none of whose views was read overlaps no input partly (an optimizer's foreach
    ops write whole buffers and read grads, views of other buffers: one lookup each)."""
    watched = None if view_roots is None else {id(r) for r in view_roots}
    inputs = None
    for t in targets:
        st = state_of(t)
        if type(st) is not Buffer and torch._debug_has_internal_overlap(t) == _YES:
            raise RuntimeError(_SELF)
        root = st.root
        if watched is not None and id(root) not in watched:
            continue
        if inputs is None:
            inputs = [(a, state_of(a).root) for a in lazy_tensors((args, kwargs), [])]
        for a, r in inputs:
            if r is root and a is not t and _partial(t, a):
                raise RuntimeError(_PARTIAL)


def _partial(a, b) -> bool:
    """eager's get_overlap_status(a, b) == Partial, for two tensors on one root buffer."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    if torch._debug_has_internal_overlap(a) != _NO or torch._debug_has_internal_overlap(b) != _NO:
        return False  # not dense: eager cannot tell, and lets it pass
    a0, b0 = a.storage_offset() * a.itemsize, b.storage_offset() * b.itemsize
    a1, b1 = a0 + a.numel() * a.itemsize, b0 + b.numel() * b.itemsize
    if a0 == b0 and a1 == b1:
        return a.stride() != b.stride()
    return a0 < b1 and b0 < a1

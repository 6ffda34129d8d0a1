"""Eager's argument errors for searchsorted and bucketize (searchsorted_pre_check in
BucketizationUtils.h), in its order and words, and for index_add and index_reduce's source:
PyTorch's meta kernels make a few of them, worded otherwise, and let the others through (an int32
sorter was used, 2-d boundaries bucketized as a batch, 0-d boundaries an IndexError; a source of
another shape added as if broadcast)."""
from __future__ import annotations

import torch

from lazyxla.jaxenv import type_name
from .checks import check, ops_named


@check(*ops_named("searchsorted"))
def _searchsorted(seq, values, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    name = "torch.searchsorted():"
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"{name} side can only be 'left' or 'right' but got {side}")
        if right and side != "right":
            raise RuntimeError(f"{name} side and right can't be set to opposites, got side of {side} "
                               "while right was True")
    if sorter is not None:
        if sorter.shape != seq.shape:  # (eager's words lack a space)
            raise RuntimeError(f"{name} boundary and sorter must have the same size, but got boundary "
                               f"tensor {list(seq.shape)}and got sorter tensor {list(sorter.shape)}")
        if sorter.dtype != torch.int64:
            raise RuntimeError(f"{name} sorter must be a tensor of long dtype but got dtype "
                               f"{type_name(sorter.dtype)}")
    # (a Scalar is a 0-d tensor to eager)
    vshape = list(values.shape) if isinstance(values, torch.Tensor) else []
    vdim = len(vshape)
    if vdim == 0 and seq.dim() != 1:
        raise RuntimeError(f"{name} input value can be a scalar only when boundaries tensor dimension "
                           f"is 1, but we got boundaries tensor dim({seq.dim()}) and input value's "
                           "dim(0) numel(1)")
    if seq.dim() == 0:
        raise RuntimeError(f"{name} boundaries tensor should have positive dimension, but got 0 dimension")
    if seq.dim() != 1 and (seq.dim() != vdim or list(seq.shape[:-1]) != vshape[:-1]):
        raise RuntimeError(f"{name} boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           "of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {vshape}")
    want = torch.int32 if out_int32 else torch.int64
    if out is not None and out.dtype != want:
        raise RuntimeError(f"{name} output tensor's dtype is wrong, it can only be Int(int32) or "
                           "Long(int64) depending on whether out_int32 flag is True, but we got output "
                           f"tensor's dtype {type_name(out.dtype)} and out_int32 flag is {out_int32}")
    if out_int32 and seq.shape[-1] >= 2**31 - 1:
        raise RuntimeError(f"{name} the size of boundaries' last dimension should be less than "
                           f"{2**31 - 1}, but we got {seq.shape[-1]}")


@check(*ops_named("bucketize"))
def _bucketize(values, boundaries, *, out_int32=False, right=False, out=None):
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    _searchsorted(boundaries, values, out_int32=out_int32, right=right, out=out)


_INT32_64 = (torch.int32, torch.int64)


def _same_dtype_source(name):
    def fn(x, dim, index, source, *args, **kwargs):
        if index.dtype not in _INT32_64:
            raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index but got: "
                               f"{type_name(index.dtype)}")
        if x.dtype != source.dtype:
            raise RuntimeError(f"{name}(): self ({type_name(x.dtype)}) and source "
                               f"({type_name(source.dtype)}) must have the same scalar type")
        # (the meta kernel checks the count of indices only: a source of another shape was added)
        if not -max(x.dim(), 1) <= dim < max(x.dim(), 1):
            return  # (the meta kernel's error for the dim comes first)
        xs, ss = list(x.shape), list(source.shape)
        if x.dim() and source.dim():
            d = dim % x.dim()
            xs = xs[:d] + xs[d + 1:]
            ss = ss[:d] + ss[d + 1:] if d < len(ss) else ss
        if xs != ss:
            raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                               f"specified dimension. Got self.shape = {list(x.shape)} "
                               f"source.shape = {list(source.shape)}")
    return fn


check(*ops_named("index_add", "index_add_"))(_same_dtype_source("index_add_"))
check(*ops_named("index_reduce", "index_reduce_"))(_same_dtype_source("index_reduce_"))

"""Shape ops that copy (cat, flip, roll, repeat, padding, *_scatter, *_backward of views), index
factories (arange, linspace, logspace, eye, tril/triu_indices) and sorted search (searchsorted,
bucketize). Output shapes and dtypes come from PyTorch's meta kernels (`_meta`)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.jaxenv import np_dtype
from . import views
from .exact_arith import Arith, linspace as exact_linspace
from .registry import LOWERINGS, SORTER_RANGE, aten, check_index, register


def _norm(d, n):
    return d + n if d < 0 else d


def _out(_meta):
    (shape, dtype), = _meta
    return tuple(shape), np_dtype(dtype)


# ---------------------------------------------------------------- concatenation

@register(aten.cat.default, meta=True)
def cat(tensors, dim=0, _meta=None):
    shape, dtype = _out(_meta)
    # PyTorch skips legacy empty tensors of shape (0,) whatever the other inputs' rank.
    parts = [t.astype(dtype) for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    parts = [t for t in parts if t.size or len(shape) == 0 or t.ndim == len(shape)]
    if not parts or all(t.size == 0 for t in parts):
        return jnp.zeros(shape, dtype)
    return jnp.concatenate(parts, axis=_norm(dim, len(shape)))


@register(aten.stack.default, meta=True)
def stack(tensors, dim=0, _meta=None):
    shape, dtype = _out(_meta)
    return jnp.stack([t.astype(dtype) for t in tensors], axis=_norm(dim, len(shape)))


# ---------------------------------------------------------------- reordering

@register(aten.flip.default)
def flip(x, dims):
    if x.ndim == 0:
        return x
    return jnp.flip(x, tuple(_norm(d, x.ndim) for d in dims))


@register(aten.roll.default)
def roll(x, shifts, dims=()):
    if not dims:
        return jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    return jnp.roll(x, tuple(shifts), tuple(_norm(d, x.ndim) for d in dims))


@register(aten.repeat.default)
def repeat(x, repeats):
    x = x.reshape((1,) * (len(repeats) - x.ndim) + x.shape)
    return jnp.tile(x, tuple(repeats))


# ---------------------------------------------------------------- padding

@register(aten.constant_pad_nd.default, meta=True)
def constant_pad_nd(x, pad, value=0, _meta=None):
    _, dtype = _out(_meta)
    cfg = [(0, 0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        cfg[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    return lax.pad(x.astype(dtype), jnp.asarray(value).astype(dtype), cfg)


def _replicate_fn(nd):
    """Replication padding as a gather: output j reads input clamp(j - pad_before, 0, n - 1), which
    is PyTorch's rule for positive and negative (cropping) pads alike."""
    def fwd(x, padding):
        for i in range(nd):
            ax = x.ndim - 1 - i
            a, b = padding[2 * i], padding[2 * i + 1]
            n = x.shape[ax]
            src = np.clip(np.arange(n + a + b) - a, 0, n - 1)
            x = jnp.take(x, jnp.asarray(src), axis=ax)
        return x
    return fwd


def _pad_fn(mode, nd):
    if mode == "edge":
        return _replicate_fn(nd)

    def fwd(x, padding):
        cfg = [(0, 0)] * x.ndim
        for i in range(nd):
            cfg[x.ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
        if any(a < 0 or b < 0 for a, b in cfg):  # negative padding crops (replication only)
            crop = tuple(slice(max(-a, 0), x.shape[k] - max(-b, 0)) for k, (a, b) in enumerate(cfg))
            x = x[crop]
            cfg = [(max(a, 0), max(b, 0)) for a, b in cfg]
        return jnp.pad(x, cfg, mode=mode)
    return fwd


def _pad_backward(fwd):
    def bwd(grad_output, x, padding):
        _, vjp = jax.vjp(lambda v: fwd(v, padding), x.astype(grad_output.dtype))
        return vjp(grad_output)[0]
    return bwd


for _nd in (1, 2, 3):
    for _mode, _name in (("reflect", "reflection"), ("edge", "replication")):
        _f = _pad_fn(_mode, _nd)
        register(getattr(aten, f"{_name}_pad{_nd}d").default)(_f)
        register(getattr(aten, f"{_name}_pad{_nd}d_backward").default)(_pad_backward(_f))


# ---------------------------------------------------------------- view inverses

def _scatter_through(view_fn):
    """base with `value` written into the elements `view_fn(base, *args)` selects."""
    def fn(base, value, *args):
        pos = view_fn(jnp.arange(base.size, dtype=jnp.int64).reshape(base.shape), *args)
        flat = base.reshape(-1).at[pos.reshape(-1)].set(
            jnp.broadcast_to(value, pos.shape).reshape(-1).astype(base.dtype))
        return flat.reshape(base.shape)
    return fn


@register(aten.slice_scatter.default)
def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    return views.slice_write(x, src, dim, start, end, step)


@register(aten.slice_backward.default, meta=True)
def slice_backward(grad, input_sizes, dim, start, end, step, _meta=None):
    shape, dtype = _out(_meta)
    return views.slice_write(jnp.zeros(shape, dtype), grad, dim, start, end, step)


@register(aten.select_scatter.default)
def select_scatter(x, src, dim, index):
    return views.select_write(x, src, dim, index)


@register(aten.select_backward.default, meta=True)
def select_backward(grad, input_sizes, dim, index, _meta=None):
    shape, dtype = _out(_meta)
    return views.select_write(jnp.zeros(shape, dtype), grad, dim, index)


def _dynamic_slice_backward(grad, start, dim, length, step, _meta):
    shape, dtype = _out(_meta)
    return views.dynamic_slice_scatter(jnp.zeros(shape, dtype), grad, start, dim, length, step)


def _dynamic_select_backward(grad, index, dim, _meta):
    shape, dtype = _out(_meta)
    return views.dynamic_select_scatter(jnp.zeros(shape, dtype), grad, index, dim)


# their starts as runtime scalars where they vary (views.dynamic_offset, ir/graph.py)
views.dynamic_offset(LOWERINGS[aten.slice_scatter.default], views.slice_offset,
                     views.dynamic_slice_scatter, 2)
views.dynamic_offset(LOWERINGS[aten.select_scatter.default], views.select_offset,
                     views.dynamic_select_scatter, 2)
views.dynamic_offset(LOWERINGS[aten.slice_backward.default],
                     lambda shape, _sizes, *args: views.slice_offset(shape, *args),
                     _dynamic_slice_backward, 1, meta=True, output_base=True)
views.dynamic_offset(LOWERINGS[aten.select_backward.default],
                     lambda shape, _sizes, *args: views.select_offset(shape, *args),
                     _dynamic_select_backward, 1, meta=True, output_base=True)

_diag_set = _scatter_through(views.diagonal)


@register(aten.diagonal_scatter.default)
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    return _diag_set(x, src, offset, dim1, dim2)


@register(aten.diagonal_backward.default, meta=True)
def diagonal_backward(grad, input_sizes, offset, dim1, dim2, _meta=None):
    shape, dtype = _out(_meta)
    return _diag_set(jnp.zeros(shape, dtype), grad, offset, dim1, dim2)


_strided_set = _scatter_through(views.as_strided)


@register(aten.as_strided_scatter.default)
def as_strided_scatter(x, src, size, stride, storage_offset=None):
    # lazyxla tensors are contiguous: strides address the flat row-major value.
    return _strided_set(x, src, size, stride, storage_offset)


# ---------------------------------------------------------------- factories

@register(aten.arange.default, meta=True, static=True)
def arange(end, *args, _meta=None, **kwargs):
    return _arange(0, 1, _meta)


@register(aten.arange.start, meta=True, static=True)
def arange_start(start, end, *args, _meta=None, **kwargs):
    return _arange(start, 1, _meta)


@register(aten.arange.start_step, meta=True, static=True)
def arange_start_step(start, end, step=1, *args, _meta=None, **kwargs):
    return _arange(start, step, _meta)


def _arange(start, step, _meta):
    # PyTorch computes start + i * step in the accumulate type (double for floats) then casts.
    shape, dtype = _out(_meta)
    acc = jnp.int64 if jnp.issubdtype(dtype, jnp.integer) else jnp.float64
    i = jnp.arange(shape[0], dtype=acc)
    return (jnp.asarray(start).astype(acc) + i * jnp.asarray(step).astype(acc)).astype(dtype)


def _linspace_values(start, end, steps, dtype):
    # PyTorch's CPU kernel: step in the result type (double for integers), the first half counted
    # from start and the second half back from end, so both ends are exact.
    acc = dtype if jnp.issubdtype(dtype, jnp.inexact) else jnp.float64
    if steps == 1:
        return jnp.asarray(start).astype(acc).reshape(1)
    start = jnp.asarray(start).astype(acc)
    end = jnp.asarray(end).astype(acc)
    step = (end - start) / (steps - 1)
    i = jnp.arange(steps)
    lo = start + step * i.astype(acc)
    hi = end - step * (steps - i - 1).astype(acc)
    return jnp.where(i < steps // 2, lo, hi)


@register(aten.linspace.default, meta=True, static=True)
def linspace(start, end, steps, *args, _meta=None, **kwargs):
    shape, dtype = _out(_meta)
    if steps == 0:
        return jnp.zeros(shape, dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        # Integer linspace: PyTorch truncates start + step * i computed in double.
        s0 = jnp.asarray(start).astype(jnp.int64).astype(jnp.float64)
        e0 = jnp.asarray(end).astype(jnp.int64).astype(jnp.float64)
        step = (e0 - s0) / max(steps - 1, 1)
        i = jnp.arange(steps).astype(jnp.float64)
        lo, hi = s0 + step * i, e0 - step * (steps - i - 1)
        out = lo if steps == 1 else jnp.where(i < steps // 2, lo, hi)  # one step: start
        return out.astype(jnp.int64).astype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):  # eager's fused multiply-adds, exactly
        ar = Arith(dtype)
        # behind a barrier: XLA's constant folding of the error-free sums is off by an ulp in float64
        lo, hi = lax.optimization_barrier((ar.from_double(start), ar.from_double(end)))
        return exact_linspace(ar, lo, hi, steps).astype(dtype)
    return _linspace_values(start, end, steps, dtype)


@register(aten.logspace.default, meta=True, static=True)
def logspace(start, end, steps, base=10.0, *args, _meta=None, **kwargs):
    shape, dtype = _out(_meta)
    if steps == 0:
        return jnp.zeros(shape, dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        exps = _linspace_values(start, end, steps, dtype)
        return jnp.power(jnp.asarray(base, dtype), exps)
    # PyTorch's CPU kernel: start and end cast to the dtype (1.2 -> 1 for integers), their
    # difference taken in a float dtype (C++ promotes small integers: no wrap-around), exponents
    # and powers in double, the result cast (truncated) to the dtype; one step: base ** start.
    # (Half and bfloat16 convert from double through float, as c10's conversions do.)
    via = jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype

    def cast(v):
        return jnp.asarray(v, jnp.float64).astype(via).astype(dtype)
    if steps == 1:
        exps = jnp.full((1,), start, jnp.float64)
    else:
        s, e = cast(start), cast(end)
        diff = e - s if jnp.issubdtype(dtype, jnp.floating) else e.astype(jnp.float64) - s
        step = diff.astype(jnp.float64) / (steps - 1)
        s, e = s.astype(jnp.float64), e.astype(jnp.float64)
        i = jnp.arange(steps, dtype=jnp.float64)
        exps = jnp.where(i < steps // 2, s + step * i, e - step * (steps - 1 - i))
    return jnp.power(jnp.float64(base), exps).astype(via).astype(dtype)


@register(aten.eye.default, aten.eye.m, meta=True)
def eye(n, m=None, *args, _meta=None, **kwargs):
    shape, dtype = _out(_meta)
    return jnp.eye(shape[0], shape[1], dtype=dtype)


def _tri_indices(fn):
    def low(row, col, offset=0, *args, _meta=None, **kwargs):
        shape, dtype = _out(_meta)
        r, c = fn(row, offset, col)
        return jnp.asarray(np.stack([r, c]).reshape(shape), dtype)
    return low


register(aten.tril_indices.default, meta=True)(_tri_indices(np.tril_indices))
register(aten.triu_indices.default, meta=True)(_tri_indices(np.triu_indices))


# ---------------------------------------------------------------- sorted search

def _bisect(seq, vals, right):
    """eager's CPU binary search, step for step: a lower bound moves right while
    !(seq[mid] >= v), an upper bound while !(seq[mid] > v). jnp.searchsorted orders NaN last, as
    NumPy does; eager's comparisons with NaN are false, so a NaN value lands past the end and a
    NaN in the sequence counts as below any value. seq: (..., n); vals: (..., m) with seq's
    leading dims, or any shape for a 1-d seq. Unrolled: the interval halves every step."""
    n = seq.shape[-1]
    start = jnp.zeros(vals.shape, jnp.int64)
    end = jnp.full(vals.shape, n, jnp.int64)
    for _ in range(n.bit_length()):
        mid = start + ((end - start) >> 1)
        at = jnp.minimum(mid, n - 1)
        mv = seq[at] if seq.ndim == 1 else jnp.take_along_axis(seq, at, axis=-1)
        up = ~(mv > vals) if right else ~(mv >= vals)
        live = start < end
        start = jnp.where(live & up, mid + 1, start)
        end = jnp.where(live & ~up, mid, end)
    return start


def _kind(dtype) -> int:
    return 3 if jnp.issubdtype(dtype, jnp.complexfloating) else 2 if jnp.issubdtype(
        dtype, jnp.floating) else 0 if dtype == jnp.bool_ else 1


def _compared_in(seq, vals):
    """The dtype eager compares in: PyTorch's promotion, where a 0-d value (a Scalar, weakly
    typed here, or a 0-d tensor) of the sequence's kind or a lower one takes the sequence's dtype
    (300 against int8 boundaries wraps to 44; 50.50000001 against float32 ones is 50.5), and a
    Scalar of a higher kind the default dtype of that kind."""
    if vals.ndim or not seq.ndim or _kind(vals.dtype) > _kind(seq.dtype) and not \
            getattr(vals, "weak_type", False):
        return jnp.result_type(seq.dtype, vals.dtype)
    if _kind(vals.dtype) <= _kind(seq.dtype):
        return seq.dtype
    default = np_dtype(torch.get_default_dtype())
    return default if _kind(vals.dtype) == 2 else jnp.result_type(default, jnp.complex64)


def _search(seq, vals, right, sorter):
    dtype = _compared_in(seq, vals)
    seq, vals = seq.astype(dtype), vals.astype(dtype)
    if sorter is not None:
        check_index(sorter, seq.shape[-1], negative=False, kind=SORTER_RANGE)
        seq = jnp.take_along_axis(seq, sorter, axis=-1)
    if seq.ndim == 1:
        return _bisect(seq, vals, right)
    lead = seq.shape[:-1]
    rows = math.prod(lead)  # (explicit sizes: a -1 cannot be inferred for empty inputs)
    s = seq.reshape((rows, seq.shape[-1]))
    v = vals.reshape((rows, math.prod(vals.shape[len(lead):])))
    return _bisect(s, v, right).reshape(lead + vals.shape[len(lead):])


@register(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def searchsorted(seq, x, out_int32=False, right=False, side=None, sorter=None):
    return _search(seq, jnp.asarray(x), right or side == "right", sorter)


@register(aten.bucketize.Tensor, aten.bucketize.Scalar)
def bucketize(x, boundaries, out_int32=False, right=False):
    return _search(boundaries, jnp.asarray(x), right, None)

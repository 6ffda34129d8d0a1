"""Indexing: advanced indexing (index / index_put), gather/scatter families, index_* ops, take.

Out-of-range indices: PyTorch raises on the CPU, but an XLA program cannot raise. Negative indices
are wrapped once (i + n, as PyTorch does for every op that accepts them); indices still out of
range are clamped for reads (gather-like ops) and dropped for writes (scatter-like ops). In-range
programs therefore match PyTorch exactly; out-of-range ones give a defined value, and with index
checks on (the default; lazyxla.set_index_checks) the program also returns a flag per index tensor
and the executor raises IndexError at the next read (or at the call, in strict mode).

Data-dependent shapes (boolean-mask reads `x[mask]`, nonzero, masked_select) are not lowered: their
meta kernels cannot give a shape, so they run through the CPU fallback. Boolean masks in index_put
(`x[mask] = v`) have a static result and are lowered (the mask is turned into padded coordinates
whose padding is dropped by the scatter).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from lazyxla.ir.meta import MASK_DTYPES, META_KERNELS
from .checks import check
from .pointwise import convert
from .registry import (INDEX, INDEX_BOUNDS, MASK_VALUES, MASKED_SCATTER_SOURCE, SEGMENT_NEGATIVE,
                       SEGMENT_SUM, Unsupported, aten, check_fits, check_index, check_values,
                       register)


def _norm(d, n):
    return d + n if d < 0 else d


def _wrap(i, n, negative=True, kind=INDEX, check=True):
    """Negative indices count from the end, as in PyTorch (for ops where eager rejects them,
    `negative=False`, they are out of range for the index checks but wrapped all the same).
    `kind`: the error eager raises for one out of range. Without `check` (indexing a tensor of no
    elements: eager's kernels, which check each element they copy, copy none) none is flagged."""
    i = jnp.asarray(i)
    if check:
        check_index(i, n, negative, kind)
    if jnp.issubdtype(i.dtype, jnp.unsignedinteger):
        return i
    return jnp.where(i < 0, i + n, i)


def _is_mask(i):
    return i is not None and (i.dtype == jnp.bool_ or i.dtype == jnp.uint8)


def _index_tuple(x, indices):
    """PyTorch's `Tensor?[]` indices -> a NumPy-style index tuple (None slot = whole dim).
    NumPy and PyTorch share the placement rule for (non-)adjacent advanced indices."""
    out, d = [], 0
    for i in indices:
        if i is None:
            out.append(slice(None))
            d += 1
        else:
            out.append(_wrap(i, x.shape[d], check=x.size > 0))
            d += 1
    return tuple(out)


@register(aten.index.Tensor, aten._unsafe_index.Tensor)
def index(x, indices):
    # Boolean masks never get here: their meta kernel has no static shape (CPU fallback).
    idx = _index_tuple(x, indices)
    return x.at[idx].get(mode="clip")


_BOOL_HOW = {"add": "max", "multiply": "min"}  # eager's bool + is OR, * is AND


def _update(ref, how, values):
    """ref.<how>(values) out of range dropped; JAX has no bool add or multiply."""
    if ref.array.dtype == jnp.bool_:
        how = _BOOL_HOW.get(how, how)
    return getattr(ref, how)(values, mode="drop")


def _mask_to_coords(mask):
    """k padded coordinate arrays of a k-d mask, length mask.size; padding is out of range."""
    mask = mask.astype(bool)
    big = max(mask.shape) if mask.ndim else 1
    return jnp.nonzero(mask, size=mask.size, fill_value=big)


_MIXED_MASK = ("lazyxla: index_put with a boolean mask and other index tensors (another mask, or "
               "integers other than one element of at most one dim)")


def _index_put_indices(x, indices, *args, **kwargs):
    """A mask must match the dims it indexes (eager's IndexError; the meta kernel lets it pass).
    With another mask, or integers other than one element of at most one dim, the positions
    written pair the mask's true elements with them (broadcast), which only the mask's values
    tell: the kernels run such a write on the CPU."""
    d, masks = 0, 0
    for i in indices:
        if i is not None and i.dtype in MASK_DTYPES:
            masks += 1
            for j, n in enumerate(i.shape):
                if d + j < x.dim() and x.shape[d + j] != n:
                    raise IndexError(f"The shape of the mask {list(i.shape)} at index {j} does not "
                                     f"match the shape of the indexed tensor {list(x.shape)} at "
                                     f"index {d + j}")
            d += i.dim()
        else:
            d += 1
    if masks > 1 or masks and any(i is not None and i.dtype not in MASK_DTYPES
                                  and (i.numel() != 1 or i.dim() > 1) for i in indices):
        raise Unsupported(_MIXED_MASK)


def _index_put_values(x, indices, values, *args, **kwargs):
    """The values must broadcast to the indexed result (eager's error; the meta kernel lets
    other shapes pass, and the program wrote a slice of them). A mask's result length is its
    count of true elements, known at run time only: not checked here."""
    if any(i is not None and i.dtype in MASK_DTYPES for i in indices):
        return
    try:
        result = aten.index.Tensor(torch.empty(x.shape, device="meta"), [
            None if i is None else torch.empty(i.shape, dtype=i.dtype, device="meta") for i in indices])
    except (RuntimeError, IndexError):
        return  # (bad indices: their own checks raise eager's error)
    try:
        fits = torch.broadcast_shapes(values.shape, result.shape) == result.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be "
                           f"broadcast to indexing result of shape {list(result.shape)}")


for _op in (aten.index_put.default, aten.index_put_.default, aten._index_put_impl.default,
            aten._index_put_impl_.default, aten._unsafe_index_put.default):
    check(_op)(_index_put_indices)
    check(_op)(_index_put_values)


@register(aten.index_put.default, aten._index_put_impl.default, aten._unsafe_index_put.default)
def index_put(x, indices, values, accumulate=False, unsafe=False):
    values = values.astype(x.dtype)
    if not any(_is_mask(i) for i in indices):
        idx = _index_tuple(x, indices)
        ref = x.at[idx]
        return _update(ref, "add" if accumulate else "set", values)
    # Boolean masks: each k-d mask becomes k padded coordinate arrays (nnz entries then padding).
    idx, d = [], 0
    n_adv, adv_pos, mask_len = 0, [], None
    for i in indices:
        if i is None:
            idx.append(slice(None))
            d += 1
        elif _is_mask(i):
            coords = _mask_to_coords(i)
            mask_len, nnz = i.size, jnp.count_nonzero(i)
            adv_pos.append(len(idx))
            idx.extend(coords)
            d += i.ndim
        else:
            if i.size != 1:
                raise Unsupported(_MIXED_MASK)  # (recorded calls never get here)
            adv_pos.append(len(idx))
            idx.append(_wrap(i, x.shape[d], check=x.size > 0).reshape(()))
            d += 1
    idx = tuple(idx)
    # The advanced dims broadcast to one dim of length nnz (padded to mask_len). Where it sits in
    # the indexed shape: in place when the advanced indices are adjacent, first otherwise.
    adv = [k for k, e in enumerate(idx) if not isinstance(e, slice)]
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    b0 = adv[0] if adjacent else 0
    rest = [x.shape[k] for k, e in enumerate(idx) if isinstance(e, slice)] + list(x.shape[len(idx):])
    rshape = rest[:b0] + [mask_len] + rest[b0:]
    v = values
    while v.ndim > len(rshape) and v.shape[0] == 1:
        v = v[0]
    v = v.reshape((1,) * (len(rshape) - v.ndim) + v.shape)
    if v.shape[b0] != 1:  # nnz values along the mask dim: pad to the padded length
        check_values(nnz != v.shape[b0], MASK_VALUES)  # eager's shape mismatch
        k = min(v.shape[b0], mask_len)
        pad = [(0, 0)] * v.ndim
        pad[b0] = (0, mask_len - k)
        v = jnp.pad(jnp.take(v, jnp.arange(k), axis=b0), pad)
    v = jnp.broadcast_to(v, rshape)
    ref = x.at[idx]
    return _update(ref, "add" if accumulate else "set", v)


@register(aten.index_select.default, meta=True)
def index_select(x, dim, index, _meta=None):
    (shape, _), = _meta
    if x.ndim == 0:  # PyTorch gives a 0-d result for a one-element index of a 0-d input
        check_index(index, 1, negative=False)
        return jnp.broadcast_to(x, tuple(shape))
    dim = _norm(dim, x.ndim)
    return jnp.take(x, _wrap(index.reshape(-1), x.shape[dim], False), axis=dim, mode="clip").reshape(shape)


def _coords(index, dim, n):
    """Full coordinates for gather/scatter: iota in every dim but `dim`, the index there (eager
    rejects one out of range with a RuntimeError)."""
    out = []
    for d in range(index.ndim):
        if d == dim:
            out.append(_wrap(index, n, False, INDEX_BOUNDS))
        else:
            out.append(jnp.broadcast_to(
                jnp.arange(index.shape[d]).reshape([-1 if k == d else 1 for k in range(index.ndim)]),
                index.shape))
    return tuple(out)


@register(aten.gather.default)
def gather(x, dim, index, sparse_grad=False):
    if x.ndim == 0:
        check_index(index, 1, negative=False, kind=INDEX_BOUNDS)
        return jnp.broadcast_to(x, index.shape)
    dim = _norm(dim, x.ndim)
    shape = index.shape  # (a 0-d index of a 1-d x gives a 0-d result)
    if index.ndim == 0:
        index = index.reshape(1)
    return x.at[_coords(index, dim, x.shape[dim])].get(mode="clip").reshape(shape) \
        if index.size else jnp.zeros(shape, x.dtype)


def _scatter(x, dim, index, src, how):
    if index.size == 0:
        return x
    squeeze = x.ndim == 0
    if squeeze:
        x = x.reshape(1)
    index = index.reshape((1,) * (x.ndim - index.ndim) + index.shape) if index.ndim < x.ndim else index
    dim = _norm(dim, x.ndim)
    if jnp.ndim(src) == 0:
        src = jnp.broadcast_to(jnp.asarray(src), index.shape)
    else:
        src = src.reshape((1,) * (x.ndim - src.ndim) + src.shape) if src.ndim < x.ndim else src
        src = src[tuple(slice(0, s) for s in index.shape)]
    src = src.astype(x.dtype)
    low = x.dtype if how in ("add", "multiply") and x.dtype in _HALF else None
    if low is not None:  # eager's CPU scatter sums / multiplies a half dtype in float32, rounds once
        x, src = x.astype(jnp.float32), src.astype(jnp.float32)
    ref = x.at[_coords(index, dim, x.shape[dim])]
    out = _update(ref, how, src)
    out = out.astype(low) if low is not None else out
    return out.reshape(()) if squeeze else out


_HALF = (jnp.float16, jnp.bfloat16)


_REDUCE = {"add": "add", "sum": "add", "multiply": "multiply", "prod": "multiply",
           "amax": "max", "amin": "min"}


@register(aten.scatter.src, aten.scatter.value)
def scatter(x, dim, index, src):
    return _scatter(x, dim, index, src, "set")


@register(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(x, dim, index, src, reduce):
    return _scatter(x, dim, index, src, _REDUCE[reduce])


@register(aten.scatter_add.default)
def scatter_add(x, dim, index, src):
    return _scatter(x, dim, index, src, "add")


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return jnp.zeros((), dtype)
    if reduce == "prod":
        return jnp.ones((), dtype)
    big = jnp.inf if jnp.issubdtype(dtype, jnp.floating) else (
        True if dtype == jnp.bool_ else jnp.iinfo(dtype).max)
    small = -jnp.inf if jnp.issubdtype(dtype, jnp.floating) else (
        False if dtype == jnp.bool_ else jnp.iinfo(dtype).min)
    return jnp.asarray(small if reduce == "amax" else big, dtype)


@register(aten.scatter_reduce.two)
def scatter_reduce(x, dim, index, src, reduce, include_self=True):
    hit = _scatter(jnp.zeros(x.shape, jnp.int32), dim, index, jnp.ones((), jnp.int32), "add")
    base = x if include_self else jnp.where(hit > 0, _identity(reduce, x.dtype), x)
    if reduce == "mean":
        total = _scatter(base, dim, index, src, "add")
        count = hit + (1 if include_self else 0)
        count = jnp.maximum(count, 1).astype(x.dtype)
        if jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.complexfloating):
            return total / count
        return jnp.floor_divide(total, count)
    return _scatter(base, dim, index, src, _REDUCE[reduce])


def _along(x, dim, index, negative=False, kind=INDEX):
    dim = _norm(dim, max(x.ndim, 1))
    i = _wrap(index.reshape(-1), x.shape[dim] if x.ndim else 1, negative, kind, check=x.size > 0)
    return (slice(None),) * dim + (i,), dim


@register(aten.index_add.default)
def index_add(x, dim, index, source, alpha=1):
    # eager's error for an index out of range: IndexError up to 1-d, RuntimeError above
    idx, dim = _along(x, dim, index, kind=INDEX if x.ndim <= 1 else INDEX_BOUNDS)
    if not jnp.issubdtype(x.dtype, jnp.inexact):  # eager converts alpha to the dtype (1.5 -> 1)
        alpha = jnp.asarray(alpha).astype(x.dtype)
    if x.ndim == 0:
        return x + (source * alpha).reshape(()).astype(x.dtype)
    unit = isinstance(alpha, int) and alpha == 1
    src = source if unit else source * alpha
    src = src.reshape(src.shape[:dim] + (index.size,) + src.shape[dim + 1:]) if src.ndim == x.ndim \
        else src.reshape(x.shape[:dim] + (index.size,) + x.shape[dim + 1:])
    if unit and x.ndim > 1 and x.dtype in _HALF:
        # eager adds a half dtype through scatter_add there (float32, rounded once); with an
        # alpha, or in one dim, slice by slice in the dtype
        return _update(x.astype(jnp.float32).at[idx], "add", src.astype(jnp.float32)).astype(x.dtype)
    return _update(x.at[idx], "add", src.astype(x.dtype))


def _int_alpha_meta(op):
    """PyTorch's meta kernel refuses a float alpha for an integer tensor, which eager's kernel
    converts (truncates) to the tensor's dtype."""
    def fn(x, dim, index, source, alpha=1):
        if type(alpha) is float and not (x.is_floating_point() or x.is_complex()) and x.dtype != torch.bool:
            alpha = 0
        return op(x, dim, index, source, alpha=alpha)
    return fn


for _op in (aten.index_add.default, aten.index_add_.default):
    META_KERNELS[_op] = _int_alpha_meta(_op)


@register(aten.index_copy.default)
def index_copy(x, dim, index, source):
    idx, dim = _along(x, dim, index)
    if x.ndim == 0:
        return source.reshape(()).astype(x.dtype)
    src = source.reshape(x.shape[:dim] + (index.size,) + x.shape[dim + 1:])
    return x.at[idx].set(src.astype(x.dtype), mode="drop")


@register(aten.index_fill.int_Tensor)
def index_fill_tensor(x, dim, index, value):
    """A 0-d tensor value: eager converts its `.item()` with an overflow check."""
    check_fits(value, x.dtype)
    return index_fill(x, dim, index, value)


@register(aten.index_fill.int_Scalar)
def index_fill(x, dim, index, value):
    value = convert(jnp.asarray(value).reshape(()), x.dtype)
    idx, _ = _along(x, dim, index, negative=True)
    if x.ndim == 0:
        return jnp.where(index.size > 0, value, x)
    return x.at[idx].set(value, mode="drop")


@register(aten.masked_scatter.default)
def masked_scatter(x, mask, source):
    shape = jnp.broadcast_shapes(x.shape, mask.shape)
    x = jnp.broadcast_to(x, shape)
    m = jnp.broadcast_to(mask.astype(bool), shape).reshape(-1)
    rank = jnp.cumsum(m.astype(jnp.int64)) - 1
    src = source.reshape(-1)
    check_values(jnp.sum(m) > src.size, MASKED_SCATTER_SOURCE)
    if src.size == 0:
        return x
    vals = src[jnp.clip(rank, 0, src.size - 1)].astype(x.dtype)
    return jnp.where(m, vals, x.reshape(-1)).reshape(shape)


@register(aten.take.default)
def take(x, index):
    flat = x.reshape(-1)
    if flat.size == 0:
        return jnp.zeros(index.shape, x.dtype)
    return flat.at[_wrap(index, flat.size)].get(mode="clip")




@register(aten.index_reduce.default)
def index_reduce(x, dim, index, source, reduce, include_self=True):
    squeeze = x.ndim == 0
    if squeeze:
        x, source = x.reshape(1), source.reshape(1)
    dim = _norm(dim, x.ndim)
    xs = jnp.moveaxis(x, dim, 0)
    src = jnp.moveaxis(source.reshape(source.shape if source.ndim == x.ndim else x.shape[:dim] + (-1,) + x.shape[dim + 1:]), dim, 0).astype(x.dtype)
    idx = _wrap(index.reshape(-1), x.shape[dim], False)
    hit = jnp.zeros((xs.shape[0],), jnp.int32).at[idx].add(1, mode="drop")
    hit_b = hit.reshape((-1,) + (1,) * (xs.ndim - 1))
    base = xs if include_self else jnp.where(hit_b > 0, _identity(reduce, x.dtype), xs)
    if reduce == "mean":
        total = base.at[idx].add(src, mode="drop")
        count = jnp.maximum(hit_b + (1 if include_self else 0), 1)
        if jnp.issubdtype(x.dtype, jnp.floating):  # eager counts in the dtype, one at a time:
            # past 2**(mantissa bits + 1) (256 in bfloat16) adding 1 no longer changes it
            count = jnp.minimum(count, 2 ** (jnp.finfo(x.dtype).nmant + 1))
        count = count.astype(x.dtype)
        out = total / count if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.floor_divide(total, count)
    else:
        out = _update(base.at[idx], _REDUCE[reduce], src)
    out = jnp.moveaxis(out, 0, dim)
    return out.reshape(()) if squeeze else out


@register(aten.put.default)
def put(x, index, source, accumulate=False):
    flat = x.reshape(-1)
    if index.size == 0 or flat.size == 0:
        return x
    ref = flat.at[_wrap(index.reshape(-1), flat.size)]
    src = source.reshape(-1).astype(x.dtype)
    out = _update(ref, "add" if accumulate else "set", src)
    return out.reshape(x.shape)


# ---------------------------------------------------------------- segment_reduce

def _segment_reduce(data, reduce, lengths, offsets, axis, initial):
    if lengths is None:
        lengths = jnp.diff(offsets, axis=-1)
    if lengths.ndim > 1:  # batched: leading dims of lengths index data's leading dims
        import jax
        lead = lengths.shape[:-1]
        b = int(np.prod(lead))
        f = jax.vmap(lambda d, ln: _segment_reduce(d, reduce, ln, None, 0, initial))
        out = f(data.reshape((b,) + data.shape[len(lead):]), lengths.reshape(b, -1))
        return out.reshape(lead + out.shape[1:])
    axis = _norm(axis, data.ndim)
    x = jnp.moveaxis(data, axis, 0)
    s, n = lengths.shape[0], x.shape[0]
    ends = jnp.cumsum(lengths)
    ids = jnp.searchsorted(ends, jnp.arange(n), side="right")  # >= s past the last segment: dropped
    shape = (s,) + x.shape[1:]
    reduce = {"amax": "max", "amin": "min"}.get(reduce, reduce)  # eager's two names of each
    how = {"sum": "add", "mean": "add", "max": "max", "min": "min", "prod": "multiply"}[reduce]
    ident = _identity("amax" if reduce == "max" else "amin" if reduce == "min" else reduce, x.dtype)
    start = ident if initial is None else jnp.asarray(initial).astype(x.dtype)
    out = getattr(jnp.full(shape, start, x.dtype).at[ids], how)(x, mode="drop")
    lb = lengths.reshape((s,) + (1,) * (x.ndim - 1))
    if reduce == "mean":
        out = jnp.where(lb > 0, out / jnp.maximum(lb, 1).astype(x.dtype),
                        start if initial is not None else jnp.asarray(jnp.nan, x.dtype))
    return jnp.moveaxis(out, 0, axis)


@register(aten.segment_reduce.default)
def segment_reduce(data, reduce, lengths=None, indices=None, offsets=None, axis=0, unsafe=False,
                   initial=None):
    # eager's checks of the segments (here, not in the helper the backward shares)
    if lengths is not None and not unsafe:
        check_values(lengths < 0, SEGMENT_NEGATIVE)
        check_values(jnp.sum(lengths, axis=-1) != data.shape[_norm(axis, data.ndim)], SEGMENT_SUM)
    elif offsets is not None:
        check_values(jnp.diff(offsets, axis=-1) < 0, SEGMENT_NEGATIVE)
    return _segment_reduce(data, reduce, lengths, offsets, axis, initial)


@register(aten._segment_reduce_backward.default)
def segment_reduce_backward(grad, output, data, reduce, lengths=None, offsets=None, axis=0, initial=None):
    import jax
    if reduce == "prod":
        # d out / d x = out / x, spread back along the segments (JAX has no scatter-mul gradient);
        # data with zeros: nonfinite where PyTorch's kernel takes the product of the others.
        ones = jnp.ones_like(data)
        _, pull = jax.vjp(lambda d: _segment_reduce(d, "sum", lengths, offsets, axis, None), ones)
        # pull of a segment sum broadcasts a per-segment value to its elements
        spread = pull((grad * output).astype(data.dtype))[0]
        return spread / data
    _, pull = jax.vjp(lambda d: _segment_reduce(d, reduce, lengths, offsets, axis, initial), data)
    return pull(grad.astype(data.dtype))[0]


@register(aten.nonzero_static.default)
def nonzero_static(x, *, size, fill_value=-1):
    """nonzero with a static row count: the XLA-friendly nonzero (no CPU fallback)."""
    if x.size == 0:  # jnp.argwhere fills an empty input's rows with 0
        return jnp.full((size, x.ndim), fill_value, jnp.int64)
    return jnp.argwhere(x, size=size, fill_value=fill_value).astype(jnp.int64)

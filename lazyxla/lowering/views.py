"""View ops. Each is a JAX function of the base value; writes through a view use the scatter
derived in the registry (index arithmetic, correct for every view) unless a cheaper exact inverse
is given here."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.jaxenv import np_dtype
from lazyxla.ir.node import Slot
from .registry import VIEWS, Lowering, aten, overlapping_scatter, register


def _norm(d, n):
    return d + n if d < 0 else d


@register(aten.view.default, aten._unsafe_view.default, aten._reshape_alias.default, view=True,
          scatter=lambda base, value, *a, _meta, **k: value.reshape(base.shape).astype(base.dtype))
def view(x, size, *_):
    return jnp.reshape(x, _infer_size(size, x.size))


def _infer_size(size, numel):
    size = list(size)
    if -1 in size:
        i = size.index(-1)
        rest = 1
        for j, s in enumerate(size):
            if j != i:
                rest *= s
        size[i] = numel // rest if rest else 0
    return tuple(size)


@register(aten.alias.default, aten.lift_fresh.default, view=True,
          scatter=lambda base, value, _meta: value.astype(base.dtype))
def alias(x):
    return x


@register(aten.t.default, view=True, scatter=lambda base, value, _meta: value.T.astype(base.dtype))
def t(x):
    return x.T


def _swapaxes(x, d0, d1):
    return x if x.ndim == 0 else jnp.swapaxes(x, d0, d1)  # a 0-d tensor: dims 0 and -1 name it


@register(aten.transpose.int, view=True,
          scatter=lambda base, value, d0, d1, _meta: _swapaxes(value, d0, d1).astype(base.dtype))
def transpose(x, d0, d1):
    return _swapaxes(x, d0, d1)


@register(aten.permute.default, view=True,
          scatter=lambda base, value, dims, _meta: jnp.transpose(
              value, tuple(int(i) for i in np.argsort([_norm(d, base.ndim) for d in dims]))
          ).astype(base.dtype))
def permute(x, dims):
    return jnp.transpose(x, tuple(_norm(d, x.ndim) for d in dims))


def _expand_scatter(base, value, size, implicit=False, _meta=None):
    """The copies of an expanded element share one memory location in eager, and a valid write
    (eager rejects overlapping ones) changes at most one copy of each: keep the changed copy."""
    lead = value.ndim - base.ndim
    aligned = base.reshape((1,) * lead + base.shape)
    old = jnp.broadcast_to(aligned, value.shape)
    same = value == old
    if jnp.issubdtype(value.dtype, jnp.inexact):
        same = same | (jnp.isnan(value) & jnp.isnan(old))
    axes = [i for i in range(value.ndim) if i < lead or (aligned.shape[i] == 1 and value.shape[i] != 1)]
    if not axes:
        return value.astype(base.dtype)
    front = lambda a: jnp.moveaxis(a, axes, range(len(axes))).reshape((-1,) + base.shape)  # noqa: E731
    changed, copies = ~front(same), front(value)
    pick = jnp.take_along_axis(copies, jnp.argmax(changed, axis=0)[None], axis=0)[0]
    return jnp.where(changed.any(axis=0), pick, base).astype(base.dtype)


@register(aten.expand.default, view=True, scatter=_expand_scatter)
def expand(x, size, implicit=False):
    size = tuple(x.shape[i - (len(size) - x.ndim)] if s == -1 else s for i, s in enumerate(size))
    return jnp.broadcast_to(x, size)


@register(aten.unsqueeze.default, view=True)
def unsqueeze(x, dim):
    return jnp.expand_dims(x, _norm(dim, x.ndim + 1))


@register(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, view=True)
def squeeze(x, dim=None):
    if dim is None:
        return jnp.squeeze(x)
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    dims = tuple(d for d in (_norm(d, max(x.ndim, 1)) for d in dims) if x.ndim and x.shape[d] == 1)
    return jnp.squeeze(x, dims) if dims else x


def _slice_bounds(n, start, end, step):
    start = 0 if start is None else start
    end = n if end is None else end
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    start, end = min(max(start, 0), n), min(max(end, 0), n)
    return start, max(end, start), step


def slice_offset(shape, dim=0, start=None, end=None, step=1):
    """(start, (dim, length, step)) of a slice of a value of `shape`, bounds as Python's."""
    dim = _norm(dim, len(shape))
    s, e, st = _slice_bounds(shape[dim], start, end, step)
    return s, (dim, len(range(s, e, st)), st)


def _dynamic_slice(x, start, dim, length, step):
    """x's elements start, start + step, ... (length of them) along dim; start may be traced."""
    span = (length - 1) * step + 1 if length else 0
    out = lax.dynamic_slice_in_dim(x, start, span, axis=dim)
    return out if step == 1 else lax.slice_in_dim(out, 0, span, step, axis=dim)


def dynamic_slice_scatter(base, value, start, dim, length, step, _meta=None):
    """`value` written where _dynamic_slice reads: one contiguous update, not a scatter of every
    element."""
    value = value.astype(base.dtype)
    if step != 1 and length:
        region = lax.dynamic_slice_in_dim(base, start, (length - 1) * step + 1, axis=dim)
        value = region.at[(slice(None),) * dim + (slice(None, None, step),)].set(value)
    return lax.dynamic_update_slice_in_dim(base, value, start, axis=dim)


def _write_at(offset, write):
    """The write through a view op whose start and other arguments `offset` computes from the
    base's shape and the op's arguments (after its tensor), by `write(base, value, start, ...)`."""
    def scatter(base, value, *args, _meta=None, **kwargs):
        start, rest = offset(base.shape, *args, **kwargs)
        return write(base, value, start, *rest)
    return scatter


slice_write = _write_at(slice_offset, dynamic_slice_scatter)


@register(aten.slice.Tensor, view=True, scatter=slice_write)
def slice_(x, dim=0, start=None, end=None, step=1):
    dim = _norm(dim, x.ndim)
    s, e, st = _slice_bounds(x.shape[dim], start, end, step)
    return lax.slice_in_dim(x, s, e, st, axis=dim)


def select_offset(shape, dim, index):
    dim = _norm(dim, len(shape))
    start = index + shape[dim] if index < 0 else index
    if not 0 <= start < shape[dim]:  # (recording checked it; a fed index is checked per call)
        raise IndexError(f"index {index} is out of bounds for dimension {dim} with size {shape[dim]}")
    return start, (dim,)


def _dynamic_select(x, index, dim):
    return lax.dynamic_index_in_dim(x, index, axis=dim, keepdims=False)


def dynamic_select_scatter(base, value, index, dim, _meta=None):
    return lax.dynamic_update_index_in_dim(base, value.astype(base.dtype), index, axis=dim)


select_write = _write_at(select_offset, dynamic_select_scatter)


@register(aten.select.int, view=True, scatter=select_write)
def select(x, dim, index):
    index, (dim,) = select_offset(x.shape, dim, index)
    return lax.index_in_dim(x, index, axis=dim, keepdims=False)


@register(aten.diagonal.default, view=True)
def diagonal(x, offset=0, dim1=0, dim2=1):
    return jnp.diagonal(x, offset, _norm(dim1, x.ndim), _norm(dim2, x.ndim))


def unfold(x, dim, size, step):
    if x.ndim == 0:
        return x.reshape(1)
    dim = _norm(dim, x.ndim)
    n = (x.shape[dim] - size) // step + 1
    idx = jnp.arange(n)[:, None] * step + jnp.arange(size)[None, :]
    out = jnp.take(x, idx, axis=dim)  # dims: ..., n, size, ...
    return jnp.moveaxis(out, dim + 1, -1)


register(aten.unfold.default, view=True, scatter=overlapping_scatter(unfold))(unfold)


def as_strided(x, size, stride, storage_offset=None):
    # x is a root's value, whose storage is its row-major order (the recorder moves as_strided of
    # a view to its root).
    off = storage_offset or 0
    idx = jnp.full(tuple(size), off, dtype=jnp.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (jnp.arange(n, dtype=jnp.int64) * s).reshape(shape)
    return x.reshape(-1)[idx]


register(aten.as_strided.default, view=True, scatter=overlapping_scatter(as_strided))(as_strided)


@register(aten.view_as_real.default, view=True,
          scatter=lambda base, value, _meta: lax.complex(value[..., 0], value[..., 1]).astype(base.dtype))
def view_as_real(x):
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


def _narrow_offset(shape, dim, start, length):
    dim = _norm(dim, len(shape))
    begin = start + shape[dim] if start < 0 else start
    if not (0 <= begin and 0 <= length and begin + length <= shape[dim]):  # (as select_offset)
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({shape[dim]})")
    return begin, (dim, length, 1)


@register(aten.narrow.default, view=True, scatter=_write_at(_narrow_offset, dynamic_slice_scatter))
def narrow(x, dim, start, length):
    start, (dim, length, _) = _narrow_offset(x.shape, dim, start, length)
    return lax.slice_in_dim(x, start, start + length, axis=dim)


@register(aten.view_as_complex.default, view=True,
          scatter=lambda base, value, _meta: jnp.stack([jnp.real(value), jnp.imag(value)], -1).astype(base.dtype))
def view_as_complex(x):
    return lax.complex(x[..., 0], x[..., 1])  # (`re + 1j * im`: 0 * inf made the real part NaN)


# Eager's checks of a view's input that its meta inference, keyed by shape and dtype (and strides
# where not contiguous; not storage offset or lazy bits), would miss at a signature seen before: run by the view's kernel
# on every call (device/kernels.py), a few comparisons where the input passes them. Where one
# fails, eager's own kernel runs on a meta tensor of the input's geometry and raises its error.
_COMPLEX_PARTS = (torch.float32, torch.float64, torch.float16)


def _check_view_as_complex(x):
    stride = x.stride()
    if x.dtype in _COMPLEX_PARTS and stride and x.shape[-1] == 2 and stride[-1] == 1 \
            and x.storage_offset() % 2 == 0 and all(s % 2 == 0 for s in stride[:-1]):
        return
    _eager_view(torch.view_as_complex, x)


def _check_view_as_real(x):
    if x.is_conj():  # (eager's message: resolve_conj first)
        _eager_view(torch.view_as_real, x)


def _eager_view(op, x):
    """op on a meta tensor with x's shape, strides, storage offset and lazy conj bit: eager's
    error, if eager raises one."""
    from lazyxla.ir.meta import storage_span
    shape, stride, offset = tuple(x.shape), tuple(x.stride()), x.storage_offset()
    m = torch.empty((storage_span(shape, stride, offset),), dtype=x.dtype, device="meta")
    m = m.as_strided(shape, stride, offset)
    op(m.conj() if x.is_conj() else m)


VIEW_CHECKS = {aten.view_as_complex.default: _check_view_as_complex,
               aten.view_as_real.default: _check_view_as_real}


def _bitcast(x, want):
    """Reinterpret x's bytes as dtype `want` (numpy); a size change folds into the last dim."""
    if x.dtype == want:
        return x
    if jnp.iscomplexobj(x):  # its bytes are (real, imag) float pairs
        parts = jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)
        return _bitcast(parts.reshape(x.shape[:-1] + (-1,)), want)
    if jnp.issubdtype(want, jnp.complexfloating):
        parts = _bitcast(x, jnp.finfo(want).dtype)
        parts = parts.reshape(parts.shape[:-1] + (-1, 2))
        return lax.complex(parts[..., 0], parts[..., 1])
    if x.dtype == jnp.bool_ or want == jnp.bool_:  # same size: bytes 0/1
        return x != 0 if want == jnp.bool_ else x.astype(want)
    a, b = x.dtype.itemsize, want.itemsize
    if a == b:
        return lax.bitcast_convert_type(x, want)
    if a > b:
        y = lax.bitcast_convert_type(x, want)  # (..., n, a // b)
        return y.reshape(x.shape[:-1] + (x.shape[-1] * (a // b),))
    y = x.reshape(x.shape[:-1] + (x.shape[-1] // (b // a), b // a))
    return lax.bitcast_convert_type(y, want)


@register(aten.view.dtype, view=True,
          scatter=lambda base, value, dtype, _meta: _bitcast(value, base.dtype))
def view_dtype(x, dtype):
    """Tensor.view(dtype): the same bytes read as another dtype, not a conversion."""
    return _bitcast(x, np_dtype(dtype))


# Offsets as runtime scalars. Programs that differ only in where they slice (a batch loop over a
# dataset on the device, a write at this step's position of a buffer) share one program, with each
# differing start fed at every run (ir/graph.py decides which). The host still computes the
# start, Python-style (negative, clamped), and the length, which stays part of the program.

class _Offset:
    """Lowering.offset of a view op (or its write): node -> (start, the op with its start traced,
    its attrs)."""
    __slots__ = ("params", "dynamic", "slots", "n_data", "output_base")

    def __init__(self, params, dynamic, n_data, output_base):
        self.params, self.dynamic, self.n_data = params, dynamic, n_data
        self.slots = tuple(Slot(i) for i in range(n_data + 1))  # the start is the last input
        self.output_base = output_base

    def __call__(self, node):
        base = node.shape if self.output_base else node.inputs[0].shape
        start, rest = self.start_of(base, node.attrs)
        return start, self.dynamic, (self.slots + rest, ())

    def start_of(self, base, attrs):
        """(start, the rest of the traced op's arguments) of a node with `attrs` whose base has
        shape `base`; raises for a start out of range."""
        args, kwargs = attrs
        return self.params(base, *args[self.n_data:], **dict(kwargs))


def dynamic_offset(low, params, fn, n_data, meta=False, output_base=False):
    """Sets low.offset: a node of `low` whose first n_data inputs are tensors gives its start
    and (by `params`, from the base's shape and the node's other arguments) the rest of the
    arguments of `fn(*tensors, start, *rest)`, the same op with the start traced. The base is the
    first input, or the output (`output_base`: a backward that makes the base)."""
    low.offset = _Offset(params, Lowering(f"dynamic:{low.name}", fn, meta=meta), n_data, output_base)


def _dynamic(op, params, read, write):
    low = VIEWS[op]
    dynamic_offset(low, params, read, 1)
    dynamic_offset(low.scatter, params, write, 2, meta=True)


_dynamic(aten.slice.Tensor, slice_offset, _dynamic_slice, dynamic_slice_scatter)
_dynamic(aten.narrow.default, _narrow_offset, _dynamic_slice, dynamic_slice_scatter)
_dynamic(aten.select.int, select_offset, _dynamic_select, dynamic_select_scatter)

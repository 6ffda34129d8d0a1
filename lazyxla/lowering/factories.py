"""Tensor factories and fills. Shapes and dtypes come from the meta result (`_meta`)."""
from __future__ import annotations

import jax.numpy as jnp

from lazyxla.jaxenv import np_dtype
from .pointwise import convert
from .registry import aten, register


def _zeros(_meta):
    (shape, dtype), = _meta
    return jnp.zeros(shape, np_dtype(dtype))


@register(aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
          aten.new_empty.default, aten.new_empty_strided.default, meta=True, like=True, fill=0)
def empty(*args, _meta, **kwargs):
    # Uninitialised memory in PyTorch; zeros here (XLA folds the constant away).
    return _zeros(_meta)


@register(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default, aten.zero.default, meta=True,
          like=True, fill=0)
def zeros(*args, _meta, **kwargs):
    return _zeros(_meta)


@register(aten.ones.default, aten.ones_like.default, aten.new_ones.default, meta=True, like=True,
          fill=1)
def ones(*args, _meta, **kwargs):
    (shape, dtype), = _meta
    return jnp.ones(shape, np_dtype(dtype))


@register(aten.full.default, meta=True)
def full(size, fill_value, *args, _meta, **kwargs):
    (shape, dtype), = _meta
    return jnp.full(shape, convert(fill_value, np_dtype(dtype)), np_dtype(dtype))


@register(aten.new_full.default, meta=True, like=True)
def new_full(x, size, fill_value, *args, _meta, **kwargs):
    (shape, dtype), = _meta
    return jnp.full(shape, convert(fill_value, np_dtype(dtype)), np_dtype(dtype))


@register(aten.full_like.default, meta=True, like=True)
def full_like(x, fill_value, *args, _meta, **kwargs):
    (shape, dtype), = _meta
    return jnp.full(shape, convert(fill_value, np_dtype(dtype)), np_dtype(dtype))


@register(aten.fill.Scalar, aten.fill.Tensor, meta=True, like=True)
def fill(x, value, _meta):
    (shape, dtype), = _meta
    return jnp.full(shape, convert(value, np_dtype(dtype)), np_dtype(dtype))


@register(aten.clone.default, aten.lift_fresh_copy.default, aten._to_copy.default)
def clone(x, *args, **kwargs):
    return x


@register(aten.copy.default, meta=True, like=True)
def copy(x, src, non_blocking=False, _meta=None):
    """The functional copy_, with which functionalized graphs write through a view: src in x's
    shape (and dtype, as every result is cast). Eager's kernel clones x's storage window
    (clone_preserve_strides), which put x's storage offset, a view's start, into the program."""
    (shape, _), = _meta
    return jnp.broadcast_to(src, shape)


@register(aten.scalar_tensor.default, meta=True)
def scalar_tensor(s, *args, _meta, **kwargs):
    (shape, dtype), = _meta
    return convert(s, np_dtype(dtype))

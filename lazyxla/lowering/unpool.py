"""Max unpooling (F.max_unpool1d/2d/3d) and the plane scatter it shares with the backwards of
max-type pooling (max_pool, fractional_max_pool).

An index is a flat position within its own plane (one batch element and channel). PyTorch's
decomposition adds the plane's offset and scatters into the whole flattened output, so an index
outside its plane landed silently in another channel; here each plane is scattered on its own and
an index outside [0, plane size) is eager's RuntimeError (index checks) and dropped.
"""
from __future__ import annotations

import math

import jax.numpy as jnp

from .registry import UNPOOL_INDEX, aten, check_index, register


def plane_scatter(values, indices, plane_size, how="set"):
    """(planes, plane_size): each row of values (planes, m) written (or added) at the positions in
    the same row of indices; positions outside the plane are dropped."""
    i = jnp.where((indices >= 0) & (indices < plane_size), indices, plane_size)
    rows = jnp.broadcast_to(jnp.arange(values.shape[0])[:, None], i.shape)
    ref = jnp.zeros((values.shape[0], plane_size), values.dtype).at[rows, i]
    return ref.set(values, mode="drop") if how == "set" else ref.add(values, mode="drop")


def pool_grad(grad, x, indices, nd):
    """grad_input of a max-type pooling: each output gradient added at its in-plane index."""
    planes = math.prod(x.shape[:-nd])
    m = math.prod(grad.shape[-nd:])
    out = plane_scatter(grad.reshape(planes, m), indices.reshape(planes, m),
                        math.prod(x.shape[-nd:]), how="add")
    return out.reshape(x.shape)


def _max_unpool(x, indices, output_size, nd):
    lead = x.shape[:-nd]
    plane_size = math.prod(output_size)
    check_index(indices, plane_size, negative=False, kind=UNPOOL_INDEX)
    m = math.prod(x.shape[-nd:])
    planes = math.prod(lead)
    out = plane_scatter(x.reshape(planes, m), indices.reshape(planes, m), plane_size)
    return out.reshape(tuple(lead) + tuple(output_size))


@register(aten.max_unpool2d.default)
def max_unpool2d(x, indices, output_size):
    return _max_unpool(x, indices, output_size, 2)


@register(aten.max_unpool3d.default)
def max_unpool3d(x, indices, output_size, stride, padding):
    return _max_unpool(x, indices, output_size, 3)

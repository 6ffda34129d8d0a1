"""Fractional max pooling (F.fractional_max_pool2d / 3d) and its backward ops.

The pooling windows are fixed by `random_samples` (one sample in [0, 1) per plane and spatial
dimension; F.fractional_max_pool* draws them with torch.rand, which runs on the device), so with
given samples the result is eager's exactly. Along a dimension of input size n, output size m and
window k, with alpha = (n - k) / (m - 1) and sample u, window i starts at
int((i + u) * alpha) - int(u * alpha) for i < m - 1, and the last one at n - k, computed in the
input dtype as PyTorch's CPU kernel does (half and bfloat16 rounding after every operation). The 2-d
op reads a plane's samples as (width, height), the 3-d op as (time, height, width). Within a window,
scanned in row-major order, the first maximum wins, and a NaN wins over any number (the last NaN
seen); the index is the flat position in the plane. The backward op adds each output gradient at
its index.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .exact_arith import Arith
from .registry import aten, register
from .unpool import pool_grad


def _host_alpha(ar: Arith, n, k, m):
    """(n - k) / (m - 1) in the dtype, on the host (a division by a constant inside XLA becomes a
    multiplication by the reciprocal)."""
    if ar.bits:
        q = np.float32(np.float32(n - k).astype(ar.dtype)) / np.float32(np.float32(m - 1).astype(ar.dtype))
        return np.float32(np.float32(q).astype(ar.dtype))
    return (np.asarray(n - k, ar.dtype) / np.asarray(m - 1, ar.dtype)).astype(ar.dtype)


def _starts(ar: Arith, u, n, k, m):
    """Window starts (P, m) along one dimension for per-plane samples u (P,)."""
    last = jnp.full(u.shape + (1,), n - k, jnp.int64)
    if m <= 1:
        return last[:, :m]
    alpha = jnp.asarray(_host_alpha(ar, n, k, m), ar.cd)
    i = jnp.arange(m - 1, dtype=ar.cd)
    a = ar.r(ar.r(i + u[:, None]) * alpha).astype(jnp.int64)  # truncation, as static_cast<int>
    b = ar.r(u * alpha).astype(jnp.int64)
    return jnp.concatenate([a - b[:, None], last], axis=1)


def _prefer(a, b):
    """The window's pick, as a reduction: a NaN over a number (of two NaNs the later), else the
    larger value (of equal ones the earlier: row-major window order is increasing position)."""
    (va, pa), (vb, pb) = a, b
    na, nb = jnp.isnan(va), jnp.isnan(vb)
    take_a = jnp.where(na & nb, pa > pb,
                       jnp.where(na | nb, na, (va > vb) | ((va == vb) & (pa < pb))))
    return jnp.where(take_a, va, vb), jnp.where(take_a, pa, pb)


def _pool(x, kernel_size, output_size, samples, order):
    """(output, indices) of fractional max pooling over the last len(order) dims of x; order[d] is
    the sample slot of spatial dim d."""
    nd = len(order)
    spatial = x.shape[-nd:]
    lead = x.shape[:-nd]
    planes = math.prod(lead)
    ar = Arith(x.dtype)
    u = samples.reshape(-1)[:planes * nd].reshape(planes, nd).astype(ar.cd)
    # flat in-plane position of every (output position, window offset), per plane
    pos = jnp.zeros((planes,) + (1,) * (2 * nd), jnp.int64)
    stride = math.prod(spatial)
    for d in range(nd):
        stride //= spatial[d]
        st = _starts(ar, u[:, order[d]], spatial[d], kernel_size[d], output_size[d])
        p = st[:, :, None] + jnp.arange(kernel_size[d], dtype=jnp.int64)  # (P, m, k)
        shape = [planes] + [1] * (2 * nd)
        shape[1 + d], shape[1 + nd + d] = output_size[d], kernel_size[d]
        pos = pos + (p * stride).reshape(shape)
    win = math.prod(kernel_size)
    pos = jnp.broadcast_to(pos, (planes,) + tuple(output_size) + tuple(kernel_size))
    pos = pos.reshape(planes, math.prod(output_size), win)  # (explicit sizes: planes may be 0)
    flat = x.reshape(planes, math.prod(spatial))
    vals = jnp.take_along_axis(flat, pos.reshape(planes, pos.shape[1] * win), axis=1).reshape(pos.shape)
    out, idx = lax.reduce((vals, pos), (np.array(-np.inf, vals.dtype), np.int64(np.iinfo(np.int64).max)),
                          _prefer, (2,))
    shape = lead + tuple(output_size)
    return out.reshape(shape), idx.reshape(shape)


@register(aten.fractional_max_pool2d.default)
def fractional_max_pool2d(x, kernel_size, output_size, random_samples):
    return _pool(x, kernel_size, output_size, random_samples, (1, 0))


@register(aten.fractional_max_pool3d.default)
def fractional_max_pool3d(x, kernel_size, output_size, random_samples):
    return _pool(x, kernel_size, output_size, random_samples, (0, 1, 2))


@register(aten.fractional_max_pool2d_backward.default)
def fractional_max_pool2d_backward(grad, x, kernel_size, output_size, indices):
    return pool_grad(grad, x, indices, 2)


@register(aten.fractional_max_pool3d_backward.default)
def fractional_max_pool3d_backward(grad, x, kernel_size, output_size, indices):
    return pool_grad(grad, x, indices, 3)


def _pool3d_backward_meta(grad, x, kernel_size, output_size, indices):
    """PyTorch has no meta kernel for fractional_max_pool3d_backward; its CPU kernel's checks."""
    nd = x.dim()
    if nd not in (4, 5):
        raise RuntimeError(f"fractional_max_pool3d_backward(): non-empty 4D or 5D (batch mode) tensor "
                           f"expected for input, but got: {nd}")
    off = nd - 3
    for name, i, want in (("time", 0, output_size[0]), ("height", 1, output_size[1]),
                          ("width", 2, output_size[2])):
        if grad.dim() != nd or grad.shape[off + i] != want:
            raise RuntimeError(f"fractional_max_pool3d_backward(): gradOutput {name} unexpected")
    return x.new_empty(x.shape)


_META = torch.library.Library("aten", "IMPL")
_META.impl("fractional_max_pool3d_backward", _pool3d_backward_meta, "Meta")

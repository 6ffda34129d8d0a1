"""Pairwise distances: cdist and pdist, forward and backward, as PyTorch's CPU kernels compute them.

cdist with p=2 follows PyTorch's choice of method: through a matrix product (|a|^2 - 2ab + |b|^2,
clamped at 0) when compute_mode asks for it or, by default, when either side has more than 25
rows; elementwise differences otherwise. The backward formulas are PyTorch's, including its zeros
where a distance is 0 (a p-norm has no gradient there)."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from .registry import aten, register

_HI = lax.Precision.HIGHEST


def _norm(diff, p):
    a = jnp.abs(diff)
    if p == 0:
        return jnp.sum((diff != 0).astype(diff.dtype), -1)
    if p == 1:
        return jnp.sum(a, -1)
    if p == 2:
        return jnp.sqrt(jnp.sum(a * a, -1))
    if np.isinf(p):  # (over no coordinates, eager's distance is 0)
        return jnp.max(a, -1, initial=0.0) if a.shape[-1] == 0 else jnp.max(a, -1)
    return jnp.sum(a ** p, -1) ** (1.0 / p)


def _norm_grad(diff, dist, grad, p):
    """d(dist)/d(diff) * grad, per pair: diff (..., M), dist and grad (...)."""
    d, g = dist[..., None], grad[..., None]
    zero = jnp.zeros_like(diff)
    if p == 0:
        return zero
    if p == 1:
        return jnp.sign(diff) * g
    if np.isinf(p):
        return jnp.sign(diff) * (jnp.abs(diff) == d) * g
    if p == 2:
        out = diff * g / d
    elif p < 2:
        out = jnp.sign(diff) * jnp.abs(diff) ** (p - 1) * g / d ** (p - 1)
        out = jnp.where(diff == 0, zero, out)
    else:
        out = diff * jnp.abs(diff) ** (p - 2) * g / d ** (p - 1)
    return jnp.where(d == 0, zero, out)


def _uses_mm(p, r1, r2, compute_mode):
    return p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and (r1 > 25 or r2 > 25)))


@register(aten._cdist_forward.default)
def cdist_forward(x1, x2, p, compute_mode=None):
    batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    x1 = jnp.broadcast_to(x1, batch + x1.shape[-2:])
    x2 = jnp.broadcast_to(x2, batch + x2.shape[-2:])
    if _uses_mm(p, x1.shape[-2], x2.shape[-2], compute_mode):
        n1 = jnp.sum(x1 * x1, -1, keepdims=True)
        n2 = jnp.sum(x2 * x2, -1, keepdims=True)
        a = jnp.concatenate([x1 * -2, n1, jnp.ones_like(n1)], -1)
        b = jnp.concatenate([x2, jnp.ones_like(n2), n2], -1)
        sq = jnp.matmul(a, jnp.swapaxes(b, -1, -2), precision=_HI)
        return jnp.sqrt(jnp.maximum(sq, 0))
    return _norm(x1[..., :, None, :] - x2[..., None, :, :], p)


@register(aten._cdist_backward.default)
def cdist_backward(grad, x1, x2, p, dist):
    # over the broadcast batch, as PyTorch's kernel (autograd sums it down to x1's shape); with
    # no rows, no columns or an empty batch its kernel gives zeros of x1's own shape
    batch = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    if 0 in (x1.shape[-2], x2.shape[-2], x1.shape[-1], math.prod(batch)):
        return jnp.zeros_like(x1)
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    return jnp.sum(_norm_grad(diff, dist, grad, p), -2)


def _pairs(n):
    i, j = np.triu_indices(n, 1)
    return i, j


@register(aten._pdist_forward.default)
def pdist_forward(x, p=2.0):
    i, j = _pairs(x.shape[0])
    return _norm(x[i] - x[j], p)


@register(aten._pdist_backward.default)
def pdist_backward(grad, x, p, dist):
    i, j = _pairs(x.shape[0])
    g = _norm_grad(x[i] - x[j], dist, grad, p)
    return jnp.zeros_like(x).at[i].add(g).at[j].add(-g)

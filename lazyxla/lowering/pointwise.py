"""Elementwise ops. Results are cast to PyTorch's result dtype by the registry."""
from __future__ import annotations

import jax.numpy as jnp

from .registry import aten, register


@register(aten.add.Tensor, aten.add.Scalar)
def add(x, y, alpha=1):
    return x + y * alpha if not (isinstance(alpha, int) and alpha == 1) else x + y


@register(aten.sub.Tensor, aten.sub.Scalar)
def sub(x, y, alpha=1):
    return x - y * alpha if not (isinstance(alpha, int) and alpha == 1) else x - y


@register(aten.mul.Tensor, aten.mul.Scalar)
def mul(x, y):
    return x * y


@register(aten.div.Tensor, aten.div.Scalar, meta=True)
def div(x, y, _meta):
    return jnp.true_divide(x, y)


@register(aten.neg.default)
def neg(x):
    return -x


@register(aten.exp.default)
def exp(x):
    return jnp.exp(x)


@register(aten.relu.default)
def relu(x):
    return jnp.maximum(x, 0)

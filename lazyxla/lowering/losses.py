"""Loss functions and their backward ops. `reduction` is PyTorch's enum: 0 none, 1 mean, 2 sum."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .registry import aten, register


def _reduce(x, reduction):
    if reduction == 1:
        return jnp.mean(x)
    if reduction == 2:
        return jnp.sum(x)
    return x


def _grad_scale(g, x, reduction):
    """The cotangent of each element given grad_output of the reduced loss."""
    if reduction == 1:
        return jnp.broadcast_to(g, x.shape) / x.size
    return jnp.broadcast_to(g, x.shape)


def _acc(x):
    return x.astype(jnp.float32) if x.dtype in (jnp.float16, jnp.bfloat16) else x


# ---------------------------------------------------------------- nll

def _nll_parts(x, target, weight, ignore_index, class_axis):
    """(picked -x[target] per element, per-element weight) with the class axis removed."""
    c = x.shape[class_axis]
    valid = target != ignore_index
    t = jnp.where(valid, target, 0).astype(jnp.int64)
    picked = jnp.take_along_axis(x, jnp.expand_dims(t, class_axis), axis=class_axis)
    picked = jnp.squeeze(picked, class_axis)
    w = jnp.ones((c,), x.dtype) if weight is None else weight.astype(x.dtype)
    wt = jnp.where(valid, w[t], jnp.zeros((), x.dtype))
    return -picked, wt


def _nll_forward(x, target, weight, reduction, ignore_index, class_axis):
    loss, wt = _nll_parts(x, target, weight, ignore_index, class_axis)
    loss = loss * wt
    total = jnp.sum(wt)
    if reduction == 0:
        return loss, jnp.zeros((), x.dtype)
    if reduction == 2:
        return jnp.sum(loss), total
    return jnp.sum(loss) / total, total


def _nll_backward(g, x, target, weight, reduction, ignore_index, total_weight, class_axis):
    _, wt = _nll_parts(x, target, weight, ignore_index, class_axis)
    if reduction == 1:
        gsc = wt * (g / total_weight)
    elif reduction == 2:
        gsc = wt * g
    else:
        gsc = wt * g
    t = jnp.where(target != ignore_index, target, 0).astype(jnp.int64)
    onehot = jnp.expand_dims(t, class_axis) == jax.lax.broadcasted_iota(
        jnp.int64, jnp.expand_dims(t, class_axis).shape[:class_axis] + (x.shape[class_axis],)
        + t.shape[class_axis:], class_axis)
    return jnp.where(onehot, -jnp.expand_dims(gsc, class_axis), jnp.zeros((), x.dtype))


@register(aten.nll_loss_forward.default)
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    return _nll_forward(x, target, weight, reduction, ignore_index, 0 if x.ndim == 1 else 1)


@register(aten.nll_loss_backward.default)
def nll_loss_backward(g, x, target, weight, reduction, ignore_index, total_weight):
    return _nll_backward(g, x, target, weight, reduction, ignore_index, total_weight, 0 if x.ndim == 1 else 1)


@register(aten.nll_loss2d_forward.default)
def nll_loss2d_forward(x, target, weight, reduction, ignore_index):
    return _nll_forward(x, target, weight, reduction, ignore_index, 1)


@register(aten.nll_loss2d_backward.default)
def nll_loss2d_backward(g, x, target, weight, reduction, ignore_index, total_weight):
    return _nll_backward(g, x, target, weight, reduction, ignore_index, total_weight, 1)


# ---------------------------------------------------------------- regression losses

@register(aten.mse_loss.default)
def mse_loss(x, y, reduction=1):
    return _reduce(jnp.square(x - y), reduction)


@register(aten.mse_loss_backward.default)
def mse_loss_backward(g, x, y, reduction):
    return 2 * (x - y) * _grad_scale(g, x - y, reduction)


def _smooth_l1(d, beta):
    ad = jnp.abs(d)
    if beta == 0:
        return ad
    return jnp.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)


@register(aten.smooth_l1_loss.default)
def smooth_l1_loss(x, y, reduction=1, beta=1.0):
    return _reduce(_smooth_l1(x - y, beta), reduction)


@register(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(g, x, y, reduction, beta):
    d = x - y
    if beta == 0:
        dl = jnp.sign(d)
    else:
        dl = jnp.where(d < -beta, -1.0, jnp.where(d > beta, 1.0, d / beta))
    return dl * _grad_scale(g, d, reduction)


@register(aten.huber_loss.default)
def huber_loss(x, y, reduction=1, delta=1.0):
    d = x - y
    ad = jnp.abs(d)
    return _reduce(jnp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta)), reduction)


@register(aten.huber_loss_backward.default)
def huber_loss_backward(g, x, y, reduction, delta):
    d = x - y
    dl = jnp.where(d < -delta, -delta, jnp.where(d > delta, delta, d))
    return dl * _grad_scale(g, d, reduction)


# ---------------------------------------------------------------- binary cross entropy

@register(aten.binary_cross_entropy.default)
def binary_cross_entropy(x, y, weight=None, reduction=1):
    xa, ya = _acc(x), _acc(y)
    loss = -(ya * jnp.maximum(jnp.log(xa), -100.0) + (1 - ya) * jnp.maximum(jnp.log1p(-xa), -100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@register(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(g, x, y, weight=None, reduction=1):
    xa, ya = _acc(x), _acc(y)
    gi = (xa - ya) / jnp.maximum((1 - xa) * xa, 1e-12)
    if weight is not None:
        gi = gi * weight
    return gi * _grad_scale(g, xa, reduction)


def _bce_logits(x, y, weight, pos_weight):
    # (1 - y) * x + (1 + (pw - 1) * y) * (log1p(exp(-|x|)) + max(-x, 0)), as PyTorch computes it
    sp = jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(-x, 0)
    if pos_weight is not None:
        loss = (1 - y) * x + (1 + (pos_weight - 1) * y) * sp
    else:
        loss = (1 - y) * x + sp
    if weight is not None:
        loss = loss * weight
    return loss


@register(aten.binary_cross_entropy_with_logits.default)
def binary_cross_entropy_with_logits(x, y, weight=None, pos_weight=None, reduction=1):
    return _reduce(_bce_logits(x, y, weight, pos_weight), reduction)


@register(aten.soft_margin_loss.default)
def soft_margin_loss(x, y, reduction=1):
    return _reduce(jnp.log1p(jnp.exp(-y * x)), reduction)


@register(aten.soft_margin_loss_backward.default)
def soft_margin_loss_backward(g, x, y, reduction):
    z = jnp.exp(-y * x)
    return -y * z / (1 + z) * _grad_scale(g, x, reduction)

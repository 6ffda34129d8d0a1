"""Loss functions and their backward ops. `reduction` is PyTorch's enum: 0 none, 1 mean, 2 sum."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from lazyxla.ir import meta
from .exact_arith import Arith, rounder
from .registry import BCE_INPUT, TARGET_RANGE, aten, check_index, check_values, register


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


def _low(x):
    """For a float16 / bfloat16 x: a rounder of float32 values back to its dtype, for kernels that
    eager runs in the dtype itself (scalar c10::Half / BFloat16 arithmetic rounds every result);
    None for other dtypes."""
    if x.dtype not in (jnp.float16, jnp.bfloat16):
        return None
    return rounder(x.dtype)


# ---------------------------------------------------------------- nll

def _nll_parts(x, target, weight, ignore_index, class_axis):
    """(picked -x[target] per element, per-element weight) with the class axis removed."""
    c = x.shape[class_axis]
    valid = target != ignore_index
    t = jnp.where(valid, target, 0).astype(jnp.int64)
    check_index(t, c, negative=False)
    picked = jnp.take_along_axis(x, jnp.expand_dims(t, class_axis), axis=class_axis)
    picked = jnp.squeeze(picked, class_axis)
    w = jnp.ones((c,), x.dtype) if weight is None else weight.astype(x.dtype)
    wt = jnp.where(valid, w[t], jnp.zeros((), x.dtype))
    return -picked, wt


def _nll_forward(x, target, weight, reduction, ignore_index, class_axis):
    loss, wt = _nll_parts(x, target, weight, ignore_index, class_axis)
    loss = jnp.where(target != ignore_index, loss * wt, jnp.zeros((), x.dtype))  # (+0, as eager)
    total = jnp.sum(wt)
    if reduction == 0:
        return loss, jnp.zeros((), x.dtype)
    if reduction == 2:
        return jnp.sum(loss), total
    return jnp.sum(loss) / total, total


def _nll_backward(g, x, target, weight, reduction, ignore_index, total_weight, class_axis):
    _, wt = _nll_parts(x, target, weight, ignore_index, class_axis)
    valid = target != ignore_index
    # an ignored target's gradient is 0 even where every target is ignored (0 / 0 weight)
    gsc = wt * (g / total_weight if reduction == 1 else g)
    t = jnp.where(valid, target, -1).astype(jnp.int64)  # -1: no class, its row stays +0
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


def _byte_target_meta(op, target_pos):
    """Eager's nll_loss takes uint8 class targets (Long or Byte); PyTorch's meta kernel (a
    decomposition through gather) refuses them: it sees them as int64."""
    def fn(*args):
        t = args[target_pos]
        if t.dtype == torch.uint8:
            args = args[:target_pos] + (t.long(),) + args[target_pos + 1:]
        return op(*args)
    return fn


for _op, _pos in ((aten.nll_loss_forward.default, 1), (aten.nll_loss_backward.default, 2)):
    meta.META_KERNELS[_op] = _byte_target_meta(_op, _pos)  # (nll_loss2d: eager refuses bytes too)


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
    # float16 / bfloat16: eager computes in float32 (opmath) and rounds once
    d = _acc(x) - _acc(y)
    ad = jnp.abs(d)
    loss = jnp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))
    return _reduce(loss.astype(x.dtype), reduction)


@register(aten.huber_loss_backward.default)
def huber_loss_backward(g, x, y, reduction, delta):
    d = x - y
    dl = jnp.where(d < -delta, -delta, jnp.where(d > delta, delta, d))
    return dl * _grad_scale(g, d, reduction)


# ---------------------------------------------------------------- binary cross entropy

@register(aten.binary_cross_entropy.default)
def binary_cross_entropy(x, y, weight=None, reduction=1):
    check_values(~((x >= 0) & (x <= 1)), BCE_INPUT)  # NaN fails too, as in eager's check
    r = _low(x)
    if r is not None:
        # eager's kernel in the dtype, every operation rounded:
        # (y - 1) * max(log1p(-x), -100) - y * max(log(x), -100), then loss * weight
        xa, ya = _acc(x), _acc(y)
        lo = r(r(ya - 1) * jnp.maximum(r(jnp.log1p(-xa)), -100.0))
        hi = r(ya * jnp.maximum(r(jnp.log(xa)), -100.0))
        loss = r(lo - hi)
        if weight is not None:
            loss = r(loss * _acc(weight))
        return _reduce(loss.astype(x.dtype), reduction)
    xa, ya = _acc(x), _acc(y)
    loss = -(ya * jnp.maximum(jnp.log(xa), -100.0) + (1 - ya) * jnp.maximum(jnp.log1p(-xa), -100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@register(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(g, x, y, weight=None, reduction=1):
    # eager's kernel: grad * (x - y) / max((1 - x) * x, EPSILON) in the dtype (a float16 /
    # bfloat16 one rounds every op; its EPSILON 1e-12 is the dtype's), then * weight, / numel
    r = _low(x) or (lambda v: v)  # noqa: E731
    xa, ya = _acc(x), _acc(y)
    eps = r(jnp.asarray(np.float32(1e-12)).astype(xa.dtype))  # (a C float, in the dtype)
    gi = r(r(jnp.broadcast_to(_acc(g), xa.shape) * r(xa - ya)) / jnp.maximum(r(r(1 - xa) * xa), eps))
    if weight is not None:
        gi = r(gi * _acc(weight))
    if reduction != 1:
        return gi
    # (the barrier: XLA would fold (a / b) / n into a / (b * n), which rounds otherwise)
    return r(Arith(gi.dtype).div(jax.lax.optimization_barrier(gi), jnp.asarray(x.size, gi.dtype)))


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


# ---------------------------------------------------------------- margin losses

def _vjp_first(fwd, x, g):
    _, pull = jax.vjp(fwd, x)
    return pull(jnp.broadcast_to(g, jax.eval_shape(fwd, x).shape).astype(x.dtype))[0]


def _multi_margin(x, target, p, margin, weight, reduction):
    c = x.shape[-1] if x.ndim else 1
    x2 = x.reshape(-1, c)
    t = target.reshape(-1).astype(jnp.int64)
    xy = jnp.take_along_axis(x2, t[:, None], axis=1, mode="clip")
    z = jnp.maximum(margin - xy + x2, 0)
    z = jnp.where(p == 2, z * z, z)  # p is 1 or 2 (a runtime scalar)
    if weight is not None:
        z = z * weight.astype(z.dtype)[t][:, None]
    z = jnp.where(jnp.arange(c)[None, :] == t[:, None], jnp.zeros((), z.dtype), z)
    return _reduce(jnp.sum(z, axis=1) / c, reduction)


@register("lazyxla::multi_margin_loss", meta=True)  # kernel: device/private_kernels.py
def multi_margin_loss(x, target, p=1, margin=1, weight=None, reduction=1, _meta=None):
    # (here, not in _multi_margin: the backward traces that under jax.vjp and eval_shape, where
    # a flag would belong to the wrong trace)
    check_index(target, x.shape[-1] if x.ndim else 1, negative=False, kind=TARGET_RANGE)
    return _multi_margin(x, target, p, margin, weight, reduction).reshape(_meta[0][0])


@register(aten.multi_margin_loss_backward.default)
def multi_margin_loss_backward(g, x, target, p, margin, weight=None, reduction=1):
    return _vjp_first(lambda a: _multi_margin(a, target, p, margin, weight, reduction), x, g)


def _multilabel_is_target(x2, t2):
    """Labels are target[:k] up to the first -1; is_target marks them (in x's dtype)."""
    n, c = x2.shape
    valid = jnp.cumprod((t2 >= 0).astype(jnp.int32), axis=1).astype(bool)
    rows = jnp.broadcast_to(jnp.arange(n)[:, None], t2.shape)
    cols = jnp.where(valid, t2, c)  # c: dropped
    is_target = jnp.zeros((n, c), x2.dtype).at[rows, cols].set(1, mode="drop")
    return valid, is_target


def _multilabel(x, target, reduction):
    c = x.shape[-1] if x.ndim else 1
    x2 = x.reshape(-1, c)
    t2 = target.reshape(-1, c).astype(jnp.int64)
    valid, is_target = _multilabel_is_target(x2, t2)
    xy = jnp.take_along_axis(x2, jnp.where(valid, t2, 0), axis=1)          # (n, k)
    z = jnp.maximum(1 - xy[:, :, None] + x2[:, None, :], 0)                # (n, k, c)
    z = z * (valid[:, :, None] & (is_target[:, None, :] == 0)).astype(z.dtype)
    loss = jnp.sum(z, axis=(1, 2)) / c
    return _reduce(loss, reduction), is_target.reshape(x.shape)


@register("lazyxla::multilabel_margin_loss_forward", meta=True)  # kernel: device/private_kernels.py
def multilabel_margin_loss_forward(x, target, reduction, _meta=None):
    check_index(target + 1, (x.shape[-1] if x.ndim else 1) + 1, negative=False,  # in [-1, c)
                kind=TARGET_RANGE)
    loss, is_target = _multilabel(x, target, reduction)
    return loss.reshape(_meta[0][0]), is_target


@register(aten.multilabel_margin_loss_backward.default)
def multilabel_margin_loss_backward(g, x, target, reduction, is_target):
    return _vjp_first(lambda a: _multilabel(a, target, reduction)[0], x, g)


def _meta_like_input(*args, **kwargs):
    """grad_input has the input's shape and dtype (args[1] is `self`)."""
    return args[1].new_empty(args[1].shape)


# PyTorch has no meta kernel for these backward ops; lazyxla infers shapes on meta tensors.
_META = __import__("torch").library.Library("aten", "IMPL")
for _name in ("multi_margin_loss_backward", "multilabel_margin_loss_backward"):
    _META.impl(_name, _meta_like_input, "Meta")

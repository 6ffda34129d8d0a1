"""Normalization: batch norm (training, eval, no-stats), layer norm, group norm and their
backward ops; weight norm's backward.

Statistics accumulate in float32 at least (PyTorch's opmath type). native_batch_norm's schema
updates the running statistics without declaring it: it gets a direct kernel here that records
functional ops and copies the results."""
from __future__ import annotations

import math

import jax.numpy as jnp
import ml_dtypes
import torch
from jax import lax

from .exact_arith import rounder
from .nn import _acc
from .registry import aten, register


def _bn_low(x, *params):
    """The reduced dtype PyTorch's CPU batch norm stores its statistics in: the input's float16 /
    bfloat16 when every given parameter (weight, bias, running stats) has that dtype too, else None
    (a float32 parameter makes the kernel "mixed": statistics stay float32)."""
    if x.dtype not in (jnp.float16, jnp.bfloat16):
        return None
    return x.dtype if all(p is None or p.dtype == x.dtype for p in params) else None


def _bn_train(x, w, b, eps, low=None):
    """-> (out, save_mean, save_invstd, running_update_mean, unbiased_var), accumulated in float32
    (opmath). With `low` (see _bn_low) eager CPU rounds the saved mean and invstd to it and
    normalises with the rounded values (out = x * alpha + beta, alpha = invstd * w,
    beta = b - mean * alpha). bfloat16 rounds more: the sum of squared deviations is kept in
    bfloat16 and divided by the count in bfloat16 (c10::BFloat16 arithmetic,
    var = bf16(bf16(sum) / bf16(n))), and the running-mean update takes the rounded mean; float16
    keeps both in float32."""
    xa = _acc(x)
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1] if x.size else 0
    mean = jnp.mean(xa, axis=axes)
    var_sum = jnp.sum(jnp.square(xa - _bshape(mean, x.ndim)), axis=axes)
    if low == jnp.bfloat16:
        rnd = rounder(low)
        var_sum = rnd(var_sum)
        var = rnd(var_sum / float(ml_dtypes.bfloat16(n)))
        unbiased = rnd(var_sum / float(ml_dtypes.bfloat16(max(n - 1, 1))))
    else:
        var = var_sum / max(n, 1)
        unbiased = var_sum / max(n - 1, 1)
    invstd = 1 / jnp.sqrt(var + eps)
    save_mean, save_invstd = mean, invstd
    if low is not None:
        save_mean = mean.astype(low).astype(jnp.float32)
        save_invstd = invstd.astype(low).astype(jnp.float32)
    out = _bn_apply(xa, w, b, save_mean, save_invstd)
    return out, save_mean, save_invstd, save_mean if low == jnp.bfloat16 else mean, unbiased


def _bshape(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _bn_apply(x, w, b, mean, invstd):
    # x * alpha + beta, the form PyTorch's CPU kernel computes (same rounding)
    alpha = invstd * _acc(w) if w is not None else invstd
    beta = -mean * alpha if b is None else _acc(b) - mean * alpha
    return x * _bshape(alpha, x.ndim) + _bshape(beta, x.ndim)


def _bn_eval(x, w, b, rm, rv, eps):
    invstd = 1 / jnp.sqrt(_acc(rv) + eps)  # float32, unrounded (eager CPU: 1 / std::sqrt)
    return _bn_apply(_acc(x), w, b, _acc(rm), invstd)


def _empty_stats(_meta):
    return [jnp.zeros(shape, jnp.float32) for shape, _ in _meta[1:3]]


@register(aten._native_batch_norm_legit_functional.default, meta=True)
def native_batch_norm_functional(x, w, b, rm, rv, training, momentum, eps, _meta):
    if not training:
        out = _bn_eval(x, w, b, rm, rv, eps)
        return (out, *_empty_stats(_meta), rm, rv)
    out, save_mean, invstd, mean, unbiased = _bn_train(x, w, b, eps, _bn_low(x, w, b, rm, rv))
    # float32 (opmath) update, rounded once to the running stats' dtype
    new_rm = momentum * mean + (1 - momentum) * _acc(rm)
    new_rv = momentum * unbiased + (1 - momentum) * _acc(rv)
    return out, save_mean, invstd, new_rm, new_rv


@register(aten._native_batch_norm_legit.no_stats)
def native_batch_norm_no_stats(x, w, b, training, momentum, eps):
    out, mean, invstd, _, _ = _bn_train(x, w, b, eps, _bn_low(x, w, b))
    return out, mean, invstd


@register(aten._native_batch_norm_legit_no_training.default, meta=True)
def native_batch_norm_no_training(x, w, b, rm, rv, momentum, eps, _meta):
    return (_bn_eval(x, w, b, rm, rv, eps), *_empty_stats(_meta))


@register(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(g, x, w, rm, rv, save_mean, save_invstd, train, eps, output_mask):
    """eager's CPU kernel, in float32 (opmath) from the saved statistics (a float16 / bfloat16
    batch's are rounded to its dtype): dx = (dy - mean(dy) - (x - mean) * k) * invstd * w with
    k = sum(dy * (x - mean)) * invstd^2 / n in training; dy * invstd * w in evaluation."""
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1] if x.size else 0
    ga, xa = _acc(g), _acc(x)
    if train:
        mean, invstd = _acc(save_mean), _acc(save_invstd)
    else:
        mean, invstd = _acc(rm), 1 / jnp.sqrt(_acc(rv) + eps)
    mean_b, invstd_b = _bshape(mean, x.ndim), _bshape(invstd, x.ndim)
    dotp = jnp.sum((xa - mean_b) * ga, axis=axes)
    total = jnp.sum(ga, axis=axes)
    gi = None
    if output_mask[0]:
        scale = invstd_b * _bshape(_acc(w), x.ndim) if w is not None else invstd_b
        if train:
            k = _bshape(dotp * invstd * invstd / max(n, 1), x.ndim)
            gi = (ga - _bshape(total / max(n, 1), x.ndim) - (xa - mean_b) * k) * scale
        else:
            gi = ga * scale
    gw = None
    if output_mask[1]:
        gw = dotp * invstd if w is not None else jnp.zeros((x.shape[1],), x.dtype)
    gb = total if output_mask[2] else None
    return gi, gw, gb


def _batch_norm_kernel(x, w, b, rm, rv, training, momentum, eps):
    """native_batch_norm updates running_mean/var in place without declaring it in its schema."""
    if training and rm is not None and rv is not None:
        out, mean, invstd, nrm, nrv = aten._native_batch_norm_legit_functional(
            x, w, b, rm, rv, training, momentum, eps)
        with torch.no_grad():
            rm.copy_(nrm)
            rv.copy_(nrv)
        return out, mean, invstd
    if training:
        return aten._native_batch_norm_legit.no_stats(x, w, b, training, momentum, eps)
    out, mean, invstd = aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, momentum, eps)
    # In evaluation PyTorch's CPU kernel saves no statistics: empty (0,) tensors (the meta
    # kernels report (C,)) of the parameters' dtype (float32 where a half input meets float32
    # ones), which its backward checks
    params = [p for p in (w, b, rm, rv) if p is not None]
    mixed = x.dtype in (torch.float16, torch.bfloat16) and any(p.dtype == torch.float32 for p in params)
    empty = lambda: mean.new_empty((0,), dtype=torch.float32 if mixed else x.dtype)  # noqa: E731
    return (out, empty(), empty())


def _batch_norm_legit_kernel(x, w, b, rm, rv, training, momentum, eps):
    return _batch_norm_kernel(x, w, b, rm, rv, training, momentum, eps)


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("native_batch_norm", _batch_norm_kernel, "PrivateUse1")
_LIB.impl("_native_batch_norm_legit", _batch_norm_legit_kernel, "PrivateUse1")


def _ln(x, shape, w, b, eps):
    nd = len(shape)
    axes = tuple(range(x.ndim - nd, x.ndim))
    xa = _acc(x)
    mean = jnp.mean(xa, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xa - mean), axis=axes, keepdims=True)
    rstd = lax.rsqrt(var + eps)
    out = (xa - mean) * rstd
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out, mean, rstd


@register(aten.native_layer_norm.default)
def native_layer_norm(x, normalized_shape, w, b, eps):
    out, mean, rstd = _ln(x, normalized_shape, w, b, eps)
    if x.dtype in (jnp.float16, jnp.bfloat16) and all(p is None or p.dtype == x.dtype for p in (w, b)):
        # eager's CPU kernel stores mean and rstd in the input's dtype (float32 where the weight or
        # bias is float32), which its backward reads: rounded here too, kept float32 as
        # PyTorch's meta kernel (and CUDA) give them
        rnd = rounder(x.dtype)
        mean, rstd = rnd(mean), rnd(rstd)
    return out.astype(x.dtype), mean, rstd


@register(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(g, x, normalized_shape, mean, rstd, w, b, output_mask):
    nd = len(normalized_shape)
    axes = tuple(range(x.ndim - nd, x.ndim))
    lead = tuple(range(x.ndim - nd))
    ga, xa = _acc(g), _acc(x)
    xhat = (xa - mean) * rstd
    gi = None
    if output_mask[0]:  # eager's kernel: rstd * dy * w + b * x + c, per row
        gw_ = ga * w if w is not None else ga
        scale = 1 / math.prod(normalized_shape) if normalized_shape else 1.0
        ds = jnp.sum(gw_ * xa, axis=axes, keepdims=True)
        db = jnp.sum(gw_, axis=axes, keepdims=True)
        b_ = (db * mean - ds) * rstd * rstd * rstd * scale
        a = rstd * ga * w if w is not None else rstd * ga  # ((rstd * dy) * w, as eager)
        gi = a + b_ * xa + (-b_ * mean - db * rstd * scale)
    gw = jnp.sum(ga * xhat, axis=lead) if output_mask[1] and w is not None else None
    gb = jnp.sum(ga, axis=lead) if output_mask[2] and b is not None else None
    return gi, gw, gb


def _group_sums(t, n, group):
    """Per-(sample, group) sums of t (N, C, ...), by channel first: every op keeps x's own shape,
    so a channels-last convolution's result stays channels-last through the norm
    (runtime/channels_last.py; a reshape to (N, G, -1) would need it logical)."""
    per_channel = jnp.sum(t, axis=tuple(range(2, t.ndim)))
    return per_channel.reshape(n, group, t.shape[1] // group).sum(axis=-1)  # (an empty batch: no -1)


def _per_channel(v, c, ndim):
    """(N, G) -> (N, C, 1, ...): each group's value for each of its channels."""
    return jnp.repeat(v, c // v.shape[1], axis=1).reshape(v.shape[:1] + (c,) + (1,) * (ndim - 2))


def _gn(x, w, b, n, c, hxw, group, eps):
    xa = _acc(x)
    count = (c // group) * hxw
    mean = _group_sums(xa, n, group) / count
    centered = xa - _per_channel(mean, c, x.ndim)
    rstd = lax.rsqrt(_group_sums(jnp.square(centered), n, group) / count + eps)
    out = centered * _per_channel(rstd, c, x.ndim)
    if w is not None:
        out = out * _bshape(w, x.ndim)
    if b is not None:
        out = out + _bshape(b, x.ndim)
    return out, mean, rstd


@register(aten.native_group_norm.default)
def native_group_norm(x, w, b, n, c, hxw, group, eps):
    return _gn(x, w, b, n, c, hxw, group, eps)


@register(aten.native_group_norm_backward.default)
def native_group_norm_backward(g, x, mean, rstd, w, n, c, hxw, group, output_mask):
    ga = _acc(g)
    rstd_c = _per_channel(rstd, c, x.ndim)
    xhat = (_acc(x) - _per_channel(mean, c, x.ndim)) * rstd_c
    gi = gw = gb = None
    if output_mask[0]:
        gx = ga * _bshape(w, x.ndim) if w is not None else ga
        count = (c // group) * hxw
        s1 = _per_channel(_group_sums(gx, n, group), c, x.ndim) / count
        s2 = _per_channel(_group_sums(gx * xhat, n, group), c, x.ndim) / count
        gi = rstd_c * (gx - s1 - xhat * s2)
    spread = (0,) + tuple(range(2, x.ndim))
    if output_mask[1]:
        gw = jnp.sum(ga * xhat, axis=spread)
    if output_mask[2]:
        gb = jnp.sum(ga, axis=spread)
    return gi, gw, gb


def _batch_norm_with_update_kernel(x, w, b, rm, rv, momentum, eps):
    """_batch_norm_with_update: training batch norm that updates the running stats in place; the
    fourth output is the (empty, uint8) cuDNN reserve."""
    out, mean, invstd = _batch_norm_kernel(x, w, b, rm, rv, True, momentum, eps)
    return out, mean, invstd, x.new_empty((0,), dtype=torch.uint8)


_LIB.impl("_batch_norm_with_update", _batch_norm_with_update_kernel, "PrivateUse1")


@register(aten.batch_norm_backward.default)
def batch_norm_backward(g, x, w, rm, rv, save_mean, save_var, update, eps, output_mask, reserve):
    return native_batch_norm_backward(g, x, w, rm, rv, save_mean, save_var, update, eps, output_mask)


def _weight_norm_dims(v, dim):
    """The dims the norm runs over, and the shape that broadcasts g and the norms against v
    (dim is the first or the last: checks.py refuses others at the call)."""
    shape = [1] * v.ndim
    shape[dim] = -1
    return tuple(i for i in range(v.ndim) if i != dim), shape


@register(aten._weight_norm_interface.default)
def weight_norm_interface(v, g, dim=0):
    """w = v * (g / |v|), the norm over every dim but `dim` (the first or the last), and the
    norms; computed in float32 at least and rounded once, the norms kept in it, as PyTorch's CPU
    kernel does."""
    axes, shape = _weight_norm_dims(v, dim)
    va = _acc(v)
    n = jnp.sqrt(jnp.sum(va * va, axis=axes)).reshape(shape)
    w = va * (_acc(g).reshape(shape) / n)
    return w.astype(v.dtype), n.reshape(g.shape)


@register(aten._weight_norm_interface_backward.default)
def weight_norm_interface_backward(grad_w, v, g, norms, dim):
    """w = v * g / |v| (the norm over every dim but `dim`, the first or the last): grad_g =
    sum(grad_w * v) / |v|, grad_v = (g / |v|) * (grad_w - v * grad_g / |v|), in float32 at least
    (PyTorch's CPU kernel accumulates in opmath too)."""
    axes, shape = _weight_norm_dims(v, dim)
    gw, va = _acc(grad_w), _acc(v)
    n, ga = _acc(norms).reshape(shape), _acc(g).reshape(shape)
    s = jnp.sum(gw * va, axis=axes).reshape(shape)
    grad_g = s / n
    grad_v = (ga / n) * gw - (ga / n) * (s / (n * n)) * va
    return grad_v.astype(v.dtype), grad_g.reshape(g.shape).astype(g.dtype)

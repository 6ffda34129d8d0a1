"""Activation functions and the backward ops autograd calls for them.

Formulas follow PyTorch's CPU kernels (aten/src/ATen/native/cpu/Activation.cpp), computed in the
opmath dtype (float32 for bfloat16/float16) and rounded once by the registry's final cast.
Scalar arguments (slopes, thresholds, alpha...) arrive as weak 0-d arrays.
"""
from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.jaxenv import np_dtype
from . import linalg
from .exact_arith import Arith, rounder
from .pointwise import compute, in_dtype_of, out_dtype
from .registry import aten, register

_SQRT1_2 = 1 / math.sqrt(2)
_2_SQRTPI = 2 / math.sqrt(math.pi)
_GELU_BETA = math.sqrt(2) * _2_SQRTPI * 0.5  # sqrt(2/pi)
_GELU_KAPPA = 0.044715


def _sigmoid(x):
    return 1 / (1 + jnp.exp(-x))


def _softplus1(x):
    return jnp.log1p(jnp.exp(x))


@register(aten.gelu.default, meta=True)
def gelu(x, approximate="none", _meta=None):
    x = compute(_meta, x)
    if approximate == "tanh":
        inner = _GELU_BETA * (x + _GELU_KAPPA * x * x * x)
        return 0.5 * x * (1 + jnp.tanh(inner))
    out = x * 0.5 * (1 + lax.erf(x * _SQRT1_2))
    if _eager_gelu_of_inf_is_nan(_meta[0][1]):
        out = jnp.where(x == jnp.inf, jnp.nan, out)
    return out


@register(aten._addmm_activation.default, meta=True)
def addmm_activation(self, a, b, beta=1, alpha=1, use_gelu=False, _meta=None):
    # eager's CPU kernel: addmm, rounded to the dtype, then gelu_ (exact) or relu_ in place
    out = linalg.addmm(self, a, b, beta, alpha).astype(np_dtype(_meta[0][1]))
    return gelu(out, _meta=_meta) if use_gelu else jnp.maximum(out, jnp.zeros((), out.dtype))


@functools.cache
def _eager_gelu_of_inf_is_nan(dtype) -> bool:
    """Does eager's gelu give NaN at +inf for `dtype` on this machine? PyTorch's vectorized CPU
    kernel differs by instruction set: NaN for float32 with AVX-512, inf with AVX2. Asked of
    eager once per dtype, on a tensor long enough for the vectorized loop."""
    inf = torch.full((64,), math.inf, dtype=dtype)
    return bool(torch.isnan(torch.nn.functional.gelu(inf)).any())


@register(aten.gelu_backward.default, meta=True)
def gelu_backward(grad, x, approximate="none", _meta=None):
    grad, x = compute(_meta, grad, x)
    if approximate == "tanh":
        x_sq = x * x
        inner = _GELU_BETA * (x + _GELU_KAPPA * x_sq * x)
        t = jnp.tanh(inner)
        left, right = 0.5 * x, 1 + t
        right_derivative = left * (1 - t * t) * _GELU_BETA * (1 + 3 * _GELU_KAPPA * x_sq)
        return grad * (0.5 * right + right_derivative)
    cdf = 0.5 * (1 + lax.erf(x * _SQRT1_2))
    pdf = jnp.exp(-0.5 * x * x) * (_2_SQRTPI * _SQRT1_2 * 0.5)
    return grad * (cdf + x * pdf)


@register(aten.silu.default, meta=True)
def silu(x, _meta):
    x = compute(_meta, x)
    return x / (1 + jnp.exp(-x))


# silu_backward and mish_backward: PyTorch's CompositeImplicitAutograd kernels compute them op by
# op in the dtype (each float16 / bfloat16 step rounded); eager's CPU kernels in float32, once
@register(aten.silu_backward.default, meta=True)
def silu_backward(grad, x, _meta):
    grad, x = compute(_meta, grad, x)
    sigmoid = 1 / (1 + jnp.exp(-x))
    return grad * sigmoid * (1 + x * (1 - sigmoid))


@register(aten.mish_backward.default, meta=True)
def mish_backward(grad, x, _meta):
    grad, x = compute(_meta, grad, x)
    sigmoid = 1 / (1 + jnp.exp(-x))
    tanh_softplus = jnp.tanh(_softplus1(x))
    return grad * (tanh_softplus + x * sigmoid * (1 - tanh_softplus * tanh_softplus))


@register(aten.sigmoid_backward.default, meta=True)
def sigmoid_backward(grad, out, _meta):
    grad, out = compute(_meta, grad, out)
    if jnp.iscomplexobj(out):  # eager: grad * conj((1 - out) * out)
        return grad * jnp.conj((1 - out) * out)
    if out_dtype(_meta) == jnp.float16:  # eager's kernel: Vectorized<Half>, each op rounded
        r = rounder(jnp.float16)
        return r(r(grad * r(1 - out)) * out)
    return grad * (1 - out) * out


@register(aten.tanh_backward.default, meta=True)
def tanh_backward(grad, out, _meta):
    grad, out = compute(_meta, grad, out)
    if jnp.iscomplexobj(out):  # eager: grad * conj(1 - out^2)
        return grad * jnp.conj(1 - out * out)
    return grad * (1 - out * out)


@register(aten.logit_backward.default, meta=True)
def logit_backward(grad, x, eps=None, _meta=None):
    dt = out_dtype(_meta)
    grad, x = compute(_meta, grad, x)
    # float16 / bfloat16: eager's kernel runs on Vectorized<Half / BFloat16>, each op rounded
    r = functools.partial(in_dtype_of, _meta)
    quotient = r(grad / r(x * r(1 - x)))
    if eps is None or eps < 0:
        q = jnp.where((x == 0) | (x == 1), grad * jnp.inf, quotient)
        return jnp.where((x < 0) | (x > 1), jnp.nan, q)
    lo = r(jnp.float32(eps)) if dt in (jnp.float16, jnp.bfloat16) else eps
    return jnp.where((x < lo) | (x > r(1 - lo)), jnp.zeros_like(x), quotient)


@register(aten.threshold.default, meta=True)
def threshold(x, threshold, value, _meta):
    x, threshold, value = compute(_meta, x, threshold, value)
    return jnp.where(x <= threshold, value, x)


@register(aten.threshold_backward.default, meta=True)
def threshold_backward(grad, x, threshold, _meta):
    grad, x, threshold = compute(_meta, grad, x, threshold)
    return jnp.where(x <= threshold, jnp.zeros_like(grad), grad)


@register(aten.leaky_relu.default, meta=True)
def leaky_relu(x, negative_slope=0.01, _meta=None):
    x, slope = compute(_meta, x, negative_slope)
    return jnp.where(x > 0, x, x * slope)


@register(aten.leaky_relu_backward.default, meta=True)
def leaky_relu_backward(grad, x, negative_slope, self_is_result, _meta):
    grad, x, slope = compute(_meta, grad, x, negative_slope)
    return jnp.where(x > 0, grad, grad * slope)


@register(aten.elu.default, meta=True)
def elu(x, alpha=1, scale=1, input_scale=1, _meta=None):
    x, alpha, scale, input_scale = compute(_meta, x, alpha, scale, input_scale)
    return jnp.where(x <= 0, jnp.expm1(x * input_scale) * (alpha * scale), x * scale)


@register(aten.elu_backward.default, meta=True)
def elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result, _meta):
    grad, alpha, scale, input_scale, y = compute(_meta, grad, alpha, scale, input_scale, self_or_result)
    negcoef = alpha * scale
    if is_result:
        neg = grad * input_scale * (y + negcoef)
    else:
        neg = grad * input_scale * negcoef * jnp.exp(y * input_scale)
    return jnp.where(y <= 0, neg, grad * scale)


@register(aten.hardtanh.default, meta=True)
def hardtanh(x, min_val=-1, max_val=1, _meta=None):
    x, lo, hi = compute(_meta, x, min_val, max_val)
    return jnp.minimum(jnp.maximum(x, lo), hi)


@register(aten.hardtanh_backward.default, meta=True)
def hardtanh_backward(grad, x, min_val, max_val, _meta):
    grad, x, lo, hi = compute(_meta, grad, x, min_val, max_val)
    return jnp.where((x <= lo) | (x >= hi), jnp.zeros_like(grad), grad)


@register(aten.softplus.default, meta=True)
def softplus(x, beta=1, threshold=20, _meta=None):
    x, beta, threshold = compute(_meta, x, beta, threshold)
    xb = x * beta
    return jnp.where(xb > threshold, x, jnp.log1p(jnp.exp(xb)) / beta)


@register(aten.softplus_backward.default, meta=True)
def softplus_backward(grad, x, beta, threshold, _meta):
    grad, x, beta, threshold = compute(_meta, grad, x, beta, threshold)
    z = jnp.exp(x * beta)
    return jnp.where(x * beta > threshold, grad, grad * z / (z + 1))


def _divided(v, c):
    """v / c divided, as eager's kernels divide by their constants: XLA would multiply by the
    rounded reciprocal instead (an ulp off on a quarter of float32 hardswish's elements)."""
    return Arith(v.dtype).div(v, jnp.asarray(c, v.dtype))


@register(aten.hardsigmoid.default, meta=True)
def hardsigmoid(x, _meta):
    x = compute(_meta, x)
    return _divided(jnp.minimum(jnp.maximum(x + 3, 0), 6), 6)


@register(aten.hardsigmoid_backward.default, meta=True)
def hardsigmoid_backward(grad, x, _meta):
    grad, x = compute(_meta, grad, x)
    # eager multiplies by `scalar_t one_sixth(1.0f / 6.0f)`: the float's value, in float64 too
    sixth = jnp.asarray(np.float32(1.0) / np.float32(6.0)).astype(grad.dtype)
    return jnp.where((x > -3) & (x < 3), grad * sixth, jnp.zeros_like(grad))


@register(aten.hardswish.default, meta=True)
def hardswish(x, _meta):
    x = compute(_meta, x)
    return _divided(x * jnp.minimum(jnp.maximum(x + 3, 0), 6), 6)


@register(aten.hardswish_backward.default, meta=True)
def hardswish_backward(grad, x, _meta):
    grad, x = compute(_meta, grad, x)
    return jnp.where(x <= -3, jnp.zeros_like(grad), jnp.where(x < 3, grad * (_divided(x, 3) + 0.5), grad))


@register(aten.mish.default, meta=True)
def mish(x, _meta):
    x = compute(_meta, x)
    return x * jnp.tanh(_softplus1(x))


@register(aten.log_sigmoid_forward.default, meta=True)
def log_sigmoid_forward(x, _meta):
    x = compute(_meta, x)
    z = jnp.exp(-jnp.abs(x))
    out = jnp.minimum(x, 0) - jnp.log1p(z)
    buffer = z if tuple(_meta[1][0]) == tuple(x.shape) else jnp.zeros(_meta[1][0], x.dtype)
    return out, buffer


@register(aten.log_sigmoid_backward.default, meta=True)
def log_sigmoid_backward(grad, x, buffer, _meta):
    grad, x = compute(_meta, grad, x)
    # what the forward's buffer holds, in the dtype (recomputed: it may be empty)
    z = in_dtype_of(_meta, jnp.exp(-jnp.abs(x)))
    neg = x < 0
    return grad * (jnp.where(neg, 1.0, 0.0).astype(x.dtype) - jnp.where(neg, 1.0, -1.0).astype(x.dtype) * (z / (1 + z)))


@register(aten.glu.default, meta=True)
def glu(x, dim=-1, _meta=None):
    x = compute(_meta, x)
    a, b = jnp.split(x, 2, axis=dim)
    return a * _sigmoid(b)


@register(aten.glu_backward.default, meta=True)
def glu_backward(grad, x, dim, _meta):
    grad, x = compute(_meta, grad, x)
    a, b = jnp.split(x, 2, axis=dim)
    # eager's kernel: sigmoid(b) stored in the dtype (a float16 / bfloat16 one rounded), then
    # (1 - s) * s * a * grad in float32 and s * grad, each rounded once
    s = in_dtype_of(_meta, _sigmoid(b))
    return jnp.concatenate([s * grad, (1 - s) * s * a * grad], axis=dim)


@register(aten.hardshrink.default, meta=True)
def hardshrink(x, lambd=0.5, _meta=None):
    x, lambd = compute(_meta, x, lambd)
    return jnp.where((x >= -lambd) & (x <= lambd), jnp.zeros_like(x), x)


@register(aten.hardshrink_backward.default, aten.softshrink_backward.default, meta=True)
def shrink_backward(grad, x, lambd, _meta):
    grad, x, lambd = compute(_meta, grad, x, lambd)
    return jnp.where((x >= -lambd) & (x <= lambd), jnp.zeros_like(grad), grad)


@register(aten.softshrink.default, meta=True)
def softshrink(x, lambd=0.5, _meta=None):
    x, lambd = compute(_meta, x, lambd)
    return jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, x * 0))


@register(aten._prelu_kernel.default, meta=True)
def prelu_kernel(x, weight, _meta):
    x, weight = compute(_meta, x, weight)
    return jnp.where(x > 0, x, weight * x)


@register(aten._prelu_kernel_backward.default, meta=True)
def prelu_kernel_backward(grad, x, weight, _meta):
    grad, x, weight = compute(_meta, grad, x, weight)
    gx = jnp.where(x > 0, grad, weight * grad)
    gw = jnp.where(x > 0, jnp.zeros_like(grad), x * grad)
    return gx, jnp.broadcast_to(gw, _meta[1][0])

"""Leftover numeric families: complex construction, number theory, incomplete gamma,
multivariate log-gamma, frexp, renorm, histc."""
from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jsp
from jax import lax

from lazyxla.jaxenv import np_dtype
from .pointwise import compute, in_dtype_of, narrowed
from .registry import HISTC_RANGE, aten, check_values, register


@register(aten.complex.default, meta=True)
def complex_(real, imag, _meta):
    real, imag = compute(_meta, real, imag)
    # (lax.complex: `re + 1j * im` computes (0+1j)*(im+0j), whose 0 * inf gave a NaN real part,
    # and lost the sign of a zero part)
    return lax.complex(jnp.real(real), jnp.real(imag))


@register(aten.polar.default, meta=True)
def polar(abs_, angle, _meta):
    abs_, angle = compute(_meta, abs_, angle)
    abs_, angle = jnp.real(abs_), jnp.real(angle)
    return lax.complex(abs_ * jnp.cos(angle), abs_ * jnp.sin(angle))


@register(aten.gcd.default, meta=True)
def gcd(x, y, _meta):
    x, y = compute(_meta, x, y)
    return _euclid(x, y)


def _euclid(a, b):
    """Eager's Euclid on |a|, |b| with C's truncated remainder. jnp.gcd never ends where a value
    is the dtype's minimum (its abs stays negative); here the remainder's magnitude shrinks on
    every step whatever the signs, so the loop ends, and gcd(0, INT_MIN) is INT_MIN, as eager's."""
    a, b = jnp.broadcast_arrays(jnp.abs(a), jnp.abs(b))

    def step(ab):
        a, b = ab
        nz = a != 0
        return jnp.where(nz, lax.rem(b, jnp.where(nz, a, 1)), 0), jnp.where(nz, a, b)
    return lax.while_loop(lambda ab: jnp.any(ab[0] != 0), step, (a, b))[1]


@register(aten.lcm.default, meta=True)
def lcm(x, y, _meta):
    x, y = jnp.broadcast_arrays(*compute(_meta, x, y))
    g = _euclid(x, y)
    # C++ computes narrow integers' |x / g * y| in int and truncates the result
    out, wide = x.dtype, jnp.int32 if x.dtype.itemsize < 4 else x.dtype
    x, y, g = x.astype(wide), y.astype(wide), g.astype(wide)
    return jnp.where(g == 0, 0, jnp.abs(lax.div(x, jnp.where(g == 0, 1, g)) * y)).astype(out)


@register(aten.igamma.default, meta=True)
def igamma(a, x, _meta):
    a, x = narrowed(_meta, a, x)
    return jsp.gammainc(a, x)


@register(aten.igammac.default, meta=True)
def igammac(a, x, _meta):
    a, x = narrowed(_meta, a, x)
    return jsp.gammaincc(a, x)


@register(aten.mvlgamma.default, meta=True)
def mvlgamma(x, p, _meta):
    # PyTorch: sum_{j<p} lgamma(x - j/2) + p(p-1)/4 log(pi) (its domain check runs on the host),
    # op by op in the dtype: a half dtype rounds the shifted x, each lgamma, the sum and the constant
    x = compute(_meta, x)
    j = jnp.arange(p, dtype=x.dtype) / 2
    terms = in_dtype_of(_meta, jsp.gammaln(in_dtype_of(_meta, x[..., None] - j)))
    c = in_dtype_of(_meta, jnp.asarray(p * (p - 1) / 4 * math.log(math.pi), x.dtype))
    return in_dtype_of(_meta, jnp.sum(terms, axis=-1)) + c


@register(aten.frexp.Tensor, meta=True)
def frexp(x, _meta):
    (_, mdt), (_, edt) = _meta
    m, e = jnp.frexp(x.astype(np_dtype(mdt)))
    return m, e.astype(np_dtype(edt))


@register(aten.renorm.default, meta=True)
def renorm(x, p, dim, maxnorm, _meta):
    x = compute(_meta, x)
    dim = dim % x.ndim
    axes = tuple(i for i in range(x.ndim) if i != dim)
    p = jnp.asarray(p, x.dtype)
    norms = jnp.where(jnp.isinf(p), jnp.max(jnp.abs(x), axis=axes, keepdims=True),
                      jnp.sum(jnp.abs(x) ** p, axis=axes, keepdims=True) ** (1 / p))
    maxnorm = jnp.asarray(maxnorm, x.dtype)
    # PyTorch's CPU kernel: scale = maxnorm / (norm + 1e-7) where norm > maxnorm, stored in the
    # input's dtype (a float16 / bfloat16 factor) before x is multiplied by it
    scale = in_dtype_of(_meta, jnp.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0))
    return x * scale


@register(aten.histc.default, meta=True, static=True)
def histc(x, bins=100, min=0, max=0, _meta=None):
    (_, dt), = _meta
    x = x.astype(np_dtype(dt)).reshape(-1)
    if jnp.issubdtype(x.dtype, jnp.integer):
        return _histc_integer(x, bins, min, max)
    lo, hi = float(min), float(max)
    if lo == hi:  # PyTorch takes the data's range (and widens an empty one by 1)
        lo_t, hi_t = jnp.min(x) if x.size else 0.0, jnp.max(x) if x.size else 0.0
        check_values(~(jnp.isfinite(lo_t) & jnp.isfinite(hi_t)), HISTC_RANGE)
    else:
        lo_t, hi_t = jnp.asarray(lo, x.dtype), jnp.asarray(hi, x.dtype)
    same = lo_t == hi_t
    lo_t, hi_t = jnp.where(same, lo_t - 1, lo_t), jnp.where(same, hi_t + 1, hi_t)
    inside = (x >= lo_t) & (x <= hi_t)
    # a full-shape divisor behind a barrier: XLA rewrites x / broadcast(d) as x * (1/d), whose
    # rounding moves values on a bin boundary to the neighbouring bin
    width = lax.optimization_barrier(jnp.broadcast_to(hi_t - lo_t, x.shape))
    idx = jnp.floor((x - lo_t) * bins / width).astype(jnp.int64)
    idx = jnp.clip(idx, 0, bins - 1)  # the max value lands in the last bin
    return jnp.zeros(bins, x.dtype).at[idx].add(inside.astype(x.dtype))


def _histc_integer(x, bins, min, max):
    """Integer histc as CUDA's kernel computes it (the CPU has none; Hugging Face's MoE layers
    count tokens per expert with an int32 histc on every device but cpu and mps): the range
    truncated to the dtype, each counted element's bin (x - min) * bins // (max - min) in int64
    arithmetic, the max value in the last bin, counts in the input dtype."""
    lo, hi = int(min), int(max)
    if lo == hi:  # the data's range, widened by 1 each way when it is one value
        lo_t = jnp.min(x).astype(jnp.int64) if x.size else jnp.int64(0)
        hi_t = jnp.max(x).astype(jnp.int64) if x.size else jnp.int64(0)
    else:
        lo_t, hi_t = jnp.int64(lo), jnp.int64(hi)
    same = lo_t == hi_t
    lo_t, hi_t = jnp.where(same, lo_t - 1, lo_t), jnp.where(same, hi_t + 1, hi_t)
    v = x.astype(jnp.int64)
    inside = (v >= lo_t) & (v <= hi_t)
    idx = jnp.minimum((v - lo_t) * bins // (hi_t - lo_t), bins - 1)
    return jnp.zeros(bins, x.dtype).at[jnp.where(inside, idx, 0)].add(inside.astype(x.dtype))

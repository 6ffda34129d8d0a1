"""Arithmetic lowerings: add, sub, mul, division and remainders, powers, atan2, hypot, copysign,
nextafter, maximum/minimum, xlogy, heaviside, logaddexp, lerp, addcmul, addcdiv. The conventions
are pointwise.py's: compute in the result dtype's opmath, and follow the C++ kernels' formulas for
integer division, remainder and powers (floor/trunc rounding, the remainder's sign, int powers by
negative exponents) and C99's values for complex exp/log where a part is infinite."""
from __future__ import annotations

import math

import jax.numpy as jnp
import torch
from jax import lax

from lazyxla.ir import meta
from .exact_arith import Arith
from .pointwise import (cast, compute, in_dtype_of, is_bool, is_float, is_int, is_one, narrowed,
                        opmath, out_dtype)
from .registry import aten, check_divisor, register


def _in_dtype(_meta, s):
    """A Scalar the CPU kernel converts to the result dtype (`exponent.to<scalar_t>()`) before
    it computes in opmath: for float16 / bfloat16, pow's exponent 1.7 is 1.703125, as in eager
    (narrowed's rounding; add's and sub's alpha are 0-d operands narrowed rounds too)."""
    dt = out_dtype(_meta)
    return narrowed(_meta, s) if opmath(dt) != dt and not is_one(s) else s


@register(aten.add.Tensor, aten.add.Scalar, meta=True)
def add(x, y, alpha=1, _meta=None):
    x, y, alpha = narrowed(_meta, x, y, alpha)
    return x + y * alpha


@register(aten.sub.Tensor, aten.sub.Scalar, meta=True)
def sub(x, y, alpha=1, _meta=None):
    x, y, alpha = narrowed(_meta, x, y, alpha)
    return x - y * alpha


@register(aten.rsub.Tensor, aten.rsub.Scalar, meta=True)
def rsub(x, y, alpha=1, _meta=None):
    x, y, alpha = narrowed(_meta, x, y, alpha)
    return y - x * alpha


@register(aten.mul.Tensor, aten.mul.Scalar, meta=True)
def mul(x, y, _meta):
    x, y = narrowed(_meta, x, y, exact=(1,))
    return x * y


def _rem(x, y):
    check_divisor(x, y)
    return lax.rem(*jnp.broadcast_arrays(x, y))


def _trunc_div(x, y):
    check_divisor(x, y)
    if is_float(x.dtype):  # (divided exactly: XLA's x * (1 / y) for a one-element y moved
        return jnp.trunc(Arith(x.dtype).div(x, y))  # 63 of 20000 float32 x / 0.3 across 1)
    x, y = jnp.broadcast_arrays(x, y)
    return lax.div(x, y)


def _floor_div(x, y, r=lambda v: v):
    """r: rounds each step to a half dtype where eager's kernel does (_rounded_quotient)."""
    if is_bool(x.dtype):
        return x & y
    if not is_float(x.dtype):
        check_divisor(x, y)
        x, y = jnp.broadcast_arrays(x, y)
        q, rem = lax.div(x, y), lax.rem(x, y)
        return q - ((rem != 0) & ((rem < 0) != (y < 0))).astype(x.dtype)
    # c10 div_floor_floating: exact quotient from fmod, then floor, corrected to nearest.
    mod = r(_rem(x, y))
    div = r(r(x - mod) / y)
    div = jnp.where((mod != 0) & ((y < 0) != (mod < 0)), r(div - 1), div)
    fl = jnp.floor(div)
    fl = jnp.where(div - fl > 0.5, fl + 1, fl)
    fl = jnp.where(div != 0, fl, jnp.copysign(jnp.zeros_like(div), x / y))
    return jnp.where(y == 0, x / y, fl)


@register(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode, meta=True)
def div(x, y, rounding_mode=None, _meta=None):
    x, y = narrowed(_meta, x, y, exact=(1,))
    if rounding_mode is None:
        return _quotient(x, y)
    r = _rounded_quotient(_meta, y)
    if rounding_mode == "trunc":
        return _trunc_div(x, y) if r is None else jnp.trunc(r(_quotient(x, y)))
    if rounding_mode == "floor":
        return _floor_div(x, y) if r is None else _floor_div(x, y, r)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


def _quotient(x, y):
    """x / y. XLA turns a division by a broadcast divisor (a number, a row's sum) into a product
    by its reciprocal, which the CPU flushes to 0 where the divisor reaches 2^126 (float32;
    2^1022 float64): the quotient was 0 (`x / 1e38`). Such a divisor is quartered, and the
    quotient with it (both exact). A divisor of the quotient's own shape stays a division."""
    y = jnp.asarray(y)
    if not jnp.issubdtype(y.dtype, jnp.floating) or y.shape == jnp.broadcast_shapes(
            jnp.shape(x), y.shape):
        return x / y
    big = jnp.abs(y) >= 2.0 ** (jnp.finfo(y.dtype).maxexp - 2)
    q = x / jnp.where(big, y * 0.25, y)
    return jnp.where(big, q * 0.25, q)


@register(aten.floor_divide.default, aten.floor_divide.Scalar, meta=True)
def floor_divide(x, y, _meta):
    x, y = narrowed(_meta, x, y, exact=(1,))
    r = _rounded_quotient(_meta, y)
    return _floor_div(x, y) if r is None else _floor_div(x, y, r)


def _rounded_quotient(_meta, y):
    """How a float16 / bfloat16 floor or trunc division rounds, as eager's kernels: a one-element
    divisor (TensorIterator's is_scalar) is read unrounded and the quotient computed in float32;
    any other goes through the dtype's arithmetic, each step rounded (trunc(x / y) of the rounded
    quotient: 2320 of 20000 bfloat16 floor quotients and 3911 trunc ones differed). None where
    nothing rounds."""
    dt = out_dtype(_meta)
    return None if opmath(dt) == dt or jnp.size(y) == 1 else (lambda v: in_dtype_of(_meta, v))


@register(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor, meta=True)
def remainder(x, y, _meta):
    x, y = narrowed(_meta, x, y)
    r = _rem(x, y)  # C fmod / truncated remainder: sign of the dividend
    return jnp.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)


@register(aten.fmod.Tensor, aten.fmod.Scalar, meta=True)
def fmod(x, y, _meta):
    return _rem(*narrowed(_meta, x, y))


def _int_pow(x, y):
    pos = _wrapping_pow(x, jnp.where(y < 0, jnp.zeros_like(y), y))
    one = jnp.ones_like(x)
    odd = (y % 2) != 0
    neg = jnp.where(x == 1, one, jnp.where(x == -1, jnp.where(odd, -one, one), jnp.zeros_like(x)))
    return jnp.where(y < 0, neg, pos)


def _wrapping_pow(x, e):
    """x ** e (e >= 0) by squaring over every bit of e, wrapping around as eager's integers do.
    (jnp.power squares 6 times only: an exponent of 64 or more was wrong where the result wraps.)"""
    acc, one = jnp.ones_like(x), jnp.ones_like(e)
    for _ in range(jnp.iinfo(e.dtype).bits):
        acc = jnp.where((e & one) != 0, acc * x, acc)
        x, e = x * x, lax.shift_right_logical(e, one)
    return acc


@register(aten.pow.Tensor_Tensor, aten.pow.Scalar, meta=True)
def pow(x, y, _meta):
    dt = out_dtype(_meta)
    if is_bool(dt):
        return cast(dt, x) | ~cast(dt, y)
    x, y = narrowed(_meta, x, y)
    if is_int(dt):
        return _int_pow(x, y)
    if jnp.iscomplexobj(x):
        return _complex_pow(x, y)
    return jnp.power(x, y)


def _complex_pow(x, y):
    """jnp.power with the values PyTorch's CPU kernel gives where it computes exp(y * log(x))
    literally: for a zero base 0 where re(y) > 0, inf+NaNj where re(y) < 0, NaN+NaNj otherwise
    (0 ** 0 too); NaN for 1 ** inf, 1 ** NaN, NaN ** 0 and inf ** 0 (jnp.power gives 1)."""
    out = jnp.power(x, y)
    re, nan = jnp.real(y), complex(math.nan, math.nan)
    zero = jnp.where(re > 0, 0, jnp.where(re < 0, complex(math.inf, math.nan), nan))
    out = jnp.where(x == 0, zero.astype(out.dtype), out)
    undefined = ((x == 1) & ~jnp.isfinite(y)) | (~jnp.isfinite(x) & (y == 0))
    return jnp.where(undefined, jnp.asarray(nan, out.dtype), out)


@register(aten.pow.Tensor_Scalar, meta=True)
def pow_tensor_scalar(x, y, _meta):
    y = _in_dtype(_meta, y)  # (the exponent in the result dtype first, as eager's CPU kernel)
    out = pow(x, y, _meta=_meta)
    if jnp.iscomplexobj(out):  # a scalar exponent 0 gives 1, whatever the base (eager's shortcut)
        return jnp.where(compute(_meta, y) == 0, jnp.ones_like(out), out)
    if not is_float(out.dtype) or out_dtype(_meta) == jnp.float16:
        return out  # (float16's CPU kernel is the plain std::pow: none of the shortcuts below)
    # PyTorch's CPU kernel takes sqrt/rsqrt for exponents +-0.5: pow(-inf, 0.5) is NaN there.
    x, y = compute(_meta, x, y)
    out = jnp.where(y == 0.5, jnp.sqrt(x), jnp.where(y == -0.5, lax.rsqrt(x), out))
    if out_dtype(_meta) == jnp.bfloat16:
        # its bfloat16 kernel multiplies out 3 and -2 in the dtype: x * x rounded, then * x or 1 /
        xx = in_dtype_of(_meta, x * x)
        out = jnp.where(y == 3, xx * x, jnp.where(y == -2, 1 / xx, out))
    return out


def _bool_pow_dtype(out, x, y):
    """A bool tensor to a bool power stays bool on the CPU (True ** False is True); PyTorch's meta
    kernel says int64, as for an int exponent."""
    return out.to(torch.bool) if x.dtype is torch.bool and type(y) is bool else out


meta.OUTPUT_FIXES[aten.pow.Tensor_Scalar] = _bool_pow_dtype


def _bool_foreach_pow_dtype(outs, xs, exponent):
    exps = exponent if isinstance(exponent, (list, tuple)) else [exponent] * len(xs)
    return [_bool_pow_dtype(o, x, e) for o, x, e in zip(outs, xs, exps)]


for _op in (aten._foreach_pow.Scalar, aten._foreach_pow.ScalarList):
    meta.OUTPUT_FIXES[_op] = _bool_foreach_pow_dtype


def _bool_foreach_pow_inplace_meta(op):
    def fn(xs, exponent):
        exps = exponent if isinstance(exponent, (list, tuple)) else [exponent] * len(xs)
        if all(x.dtype is torch.bool and type(e) is bool for x, e in zip(xs, exps)):
            return None  # (as pow_ above; a list of which only some are bool goes to the kernel)
        return op(xs, exponent)
    return fn


for _op in (aten._foreach_pow_.Scalar, aten._foreach_pow_.ScalarList):
    meta.META_KERNELS[_op] = _bool_foreach_pow_inplace_meta(_op)


def _bool_pow_inplace_meta(x, exponent):
    """bool_tensor.pow_(True) writes bools, as its functional form (above); PyTorch's in-place
    meta kernel refuses it as a cast from int64."""
    if x.dtype is torch.bool and type(exponent) is bool:
        return x
    return aten.pow_.Scalar(x, exponent)


meta.META_KERNELS[aten.pow_.Scalar] = _bool_pow_inplace_meta


@register(aten.atan2.default, meta=True)
def atan2(x, y, _meta):
    return jnp.arctan2(*narrowed(_meta, x, y))


@register(aten.hypot.default, meta=True)
def hypot(x, y, _meta):
    return jnp.hypot(*narrowed(_meta, x, y))


@register(aten.copysign.Tensor, aten.copysign.Scalar, meta=True)
def copysign(x, y, _meta):
    return jnp.copysign(*compute(_meta, x, y))


@register(aten.ldexp.Tensor, meta=True)
def ldexp(x, e, _meta):
    """x * 2**e. With an integer exponent eager's kernel scales exactly: 0 * 2**128 is 0,
    inf * 2**-150 is inf and 1e-30 * 2**128 is finite in float32, where 2**e as a float32 is inf
    or 0 (PyTorch's decomposition, x * pow(2, e), gave NaN, NaN and inf). So x is scaled in double
    by three powers of two of about a third of e each, each exact and none past double's range
    (and moving toward the result: no intermediate overflows or underflows early), then rounded
    once. Other operands (a float exponent, an integer or complex x) multiply by pow(2, e), as
    eager does there."""
    dt = out_dtype(_meta)
    if not (is_float(x.dtype) and jnp.issubdtype(e.dtype, jnp.integer)):  # (a bool e raises, as eager)
        x, e = compute(_meta, x, e)
        two = jnp.asarray(2, e.dtype if jnp.issubdtype(e.dtype, jnp.inexact) else jnp.float32)
        return in_dtype_of(_meta, x * jnp.power(two, e).astype(two.dtype))
    k = jnp.clip(e.astype(jnp.int64), -2400, 2400)  # (past it every finite double is 0 or inf)
    k1 = k // 3
    k2 = (k - k1) // 2
    parts = [_power_of_two(k1), _power_of_two(k2), _power_of_two(k - k1 - k2)]

    def scaled(v):
        v = v.astype(jnp.float64)
        for p in parts:
            v = v * p
        return v
    return scaled(x).astype(dt)


def _power_of_two(k):
    """2.0**k in double, exactly, for |k| <= 1022: its bits."""
    return lax.bitcast_convert_type((k + 1023) << 52, jnp.float64)


@register(aten.nextafter.default, meta=True)
def nextafter(x, y, _meta):
    return jnp.nextafter(*cast(out_dtype(_meta), x, y))


@register(aten.maximum.default, meta=True)
def maximum(x, y, _meta):
    return jnp.maximum(*cast(out_dtype(_meta), x, y))  # NaN-propagating


@register(aten.minimum.default, meta=True)
def minimum(x, y, _meta):
    return jnp.minimum(*cast(out_dtype(_meta), x, y))


@register(aten.fmax.default, meta=True)
def fmax(x, y, _meta):
    return jnp.fmax(*cast(out_dtype(_meta), x, y))


@register(aten.fmin.default, meta=True)
def fmin(x, y, _meta):
    return jnp.fmin(*cast(out_dtype(_meta), x, y))


@register(aten.xlogy.Tensor, aten.xlogy.Scalar_Other, aten.xlogy.Scalar_Self, meta=True)
def xlogy(x, y, _meta):
    x, y = narrowed(_meta, x, y)
    r = jnp.where(x == 0, jnp.zeros_like(x), x * in_dtype_of(_meta, jnp.log(y)))
    return jnp.where(y != y, y, r)


@register(aten.heaviside.default, meta=True)
def heaviside(x, values, _meta):
    x, values = cast(out_dtype(_meta), x, values)
    return jnp.where(x == 0, values, (x > 0).astype(x.dtype))


def _cexp(z):
    """exp of a complex array with C99's values (Annex G) where a part is infinite, as eager's
    std::exp: exp(-inf + iy) = 0 for every y, exp(+inf + 0j) = +inf + 0j, exp(+inf + i inf or NaN)
    = +inf + NaN j (exp(re) * sin(im) would be 0 * inf or inf * 0 = NaN)."""
    re, im = z.real, z.imag
    m = jnp.exp(re)
    out = lax.complex(m * jnp.cos(im), jnp.where(im == 0, im, m * jnp.sin(im)))
    out = jnp.where((re == jnp.inf) & ~jnp.isfinite(im),
                    jnp.full((), complex(math.inf, math.nan), z.dtype), out)
    return jnp.where(re == -jnp.inf, jnp.zeros((), z.dtype), out)


def _clog(z):
    """log of a complex array with C99's values: |z| = inf when either part is infinite, even if
    the other is NaN (log(NaN + i inf) = inf + NaN j)."""
    re, im = z.real, z.imag
    r = jnp.where(jnp.isinf(re) | jnp.isinf(im), jnp.full((), jnp.inf, re.dtype), jnp.abs(z))
    return lax.complex(jnp.log(r), jnp.arctan2(im, re))


def log_add_exp_complex(x, y):
    """log(exp(x) + exp(y)) of complex arrays as eager's `_log_add_exp_helper` (ATen
    native/cpu/LogAddExp.h), which logaddexp and logcumsumexp use: the arguments are ordered by real
    part (ties: min = y), result = log1p(exp(min - max)) + max, so the imaginary part is max's plus
    the angle of 1 + exp(min - max) (never wrapped into (-pi, pi]). A NaN in either (real or imaginary
    part) gives NaN + NaN j; equal infinite real parts give min at -inf, log(exp(min) + exp(max))
    at +inf."""
    swap = x.real < y.real
    mn, mx = jnp.where(swap, x, y), jnp.where(swap, y, x)
    r = jnp.log1p(_cexp(mn - mx)) + mx
    inf_tie = jnp.isinf(mn.real) & (mn.real == mx.real)
    r = jnp.where(inf_tie, jnp.where(mn.real < 0, mn, _clog(_cexp(mn) + _cexp(mx))), r)
    nan = jnp.isnan(x.real) | jnp.isnan(x.imag) | jnp.isnan(y.real) | jnp.isnan(y.imag)
    return jnp.where(nan, jnp.full((), complex(math.nan, math.nan), r.dtype), r)


@register(aten.logaddexp.default, meta=True)
def logaddexp(x, y, _meta):
    x, y = narrowed(_meta, x, y)
    if jnp.iscomplexobj(x):
        return log_add_exp_complex(x, y)
    r = jnp.maximum(x, y) + jnp.log1p(jnp.exp(-jnp.abs(x - y)))
    return jnp.where(jnp.isinf(x) & (x == y), x, r)


@register(aten.logaddexp2.default, meta=True)
def logaddexp2(x, y, _meta):
    x, y = narrowed(_meta, x, y)
    r = jnp.maximum(x, y) + jnp.log1p(jnp.exp2(-jnp.abs(x - y))) * (1 / math.log(2))
    return jnp.where(jnp.isinf(x) & (x == y), x, r)


@register(aten.lerp.Scalar, meta=True)
def lerp_scalar(x, end, weight, _meta):
    """eager's kernel reads a Scalar weight in opmath, unrounded."""
    return _lerp(*narrowed(_meta, x, end, weight, exact=(2,)))


@register(aten.lerp.Tensor, meta=True)
def lerp(x, end, weight, _meta):
    return _lerp(*narrowed(_meta, x, end, weight))


def _lerp(x, end, weight):
    return jnp.where(jnp.abs(weight) < 0.5, x + weight * (end - x), end - (end - x) * (1 - weight))


@register(aten.addcmul.default, meta=True)
def addcmul(x, t1, t2, value=1, _meta=None):
    x, t1, t2, value = compute(_meta, x, t1, t2, value)
    return x + value * t1 * t2


@register(aten.addcdiv.default, meta=True)
def addcdiv(x, t1, t2, value=1, _meta=None):
    x, t1, t2, value = compute(_meta, x, t1, t2, value)
    return x + value * t1 / t2

"""Elementwise ops (arithmetic in arithmetic.py). Results are cast to PyTorch's result dtype by
the registry.

Conventions here and in arithmetic.py, to match eager CPU PyTorch:
- Arithmetic computes in the *result* dtype (from `_meta`), with bfloat16/float16 widened to float32
  ("opmath", as PyTorch's CPU kernels do) and rounded once by the registry's final cast. Inputs
  (and Scalar arguments, which arrive as weak 0-d arrays) are cast to that dtype first, so integer
  tensors meet float scalars the way PyTorch's type promotion says.
- Comparisons compute in PyTorch's promoted dtype of their inputs (`result_type`), which the meta
  result (bool) does not tell.
- Integer division, remainder, power and shifts follow the C++ kernels' formulas (floor/trunc
  rounding, remainder sign of the divisor, int power by negative exponents, out-of-range shifts).
"""
from __future__ import annotations

import math
import warnings

import jax
import jax.scipy.special  # noqa: F401
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.ir import meta
from lazyxla.jaxenv import np_dtype
from .accurate_forms import complex_abs, conj_cut, in_double, odd_cut
from .exact_arith import Arith, round_to, rounder
from .registry import COMPLEX_VALUE, astype, aten, check_fits, check_values, register

_F32 = np.dtype(np.float32)
_HALF = {np.dtype(jnp.bfloat16), np.dtype(np.float16)}


# ---------------------------------------------------------------- dtype helpers

def out_dtype(_meta, i=0):
    return np_dtype(_meta[i][1])


def opmath(dt):
    """The dtype PyTorch's CPU kernels compute `dt` in."""
    dt = np.dtype(dt)
    return _F32 if dt in _HALF else dt


def is_float(dt):
    return jnp.issubdtype(dt, jnp.floating)


def is_int(dt):
    return jnp.issubdtype(dt, jnp.integer)


def is_bool(dt):
    return np.dtype(dt) == np.bool_


def is_one(s) -> bool:
    """A Python number equal to 1 (a traced Scalar never is: it is known only when run)."""
    return isinstance(s, (int, float)) and not isinstance(s, bool) and s == 1


def convert(x, dt):
    """x (an array or a Python scalar) as an array of dtype dt (registry.astype's rules)."""
    return astype(jnp.asarray(x), dt)


def cast(dt, *xs):
    """Each of xs (array, Python scalar or None) as an array of dtype dt."""
    out = tuple(None if x is None else convert(x, dt) for x in xs)
    return out[0] if len(out) == 1 else out


def compute(_meta, *xs):
    """xs cast to the opmath dtype of the op's result. Integer and bool tensors pass through a
    half result dtype first, as eager casts its inputs to the common dtype (an int64 beyond
    float16's range is inf there; 0-dim ones, which CPU kernels may read unrounded, do not)."""
    dt = out_dtype(_meta)
    wide = opmath(dt)
    if wide != dt:
        xs = [astype(x, dt) if getattr(x, "ndim", 0) and not jnp.issubdtype(x.dtype, jnp.inexact)
              else x for x in xs]
    return cast(wide, *xs)


def narrowed(_meta, *xs, exact=()):
    """compute(), with each 0-d operand first rounded to a float16 / bfloat16 result dtype, as
    eager's TensorIterator casts 0-d tensors and Scalars to the common dtype before its kernel
    reads them (x_f16 + 2049 adds 2048; 2048 % 2049 is 0), where compute() keeps them exact as
    opmath kernels read them. `exact`: positions the kernel reads unrounded (mul's and div's
    second operand: `original_scalar_value`; lerp's Scalar weight)."""
    dt = out_dtype(_meta)
    if opmath(dt) != dt:  # (through float32, as c10::Half(float); reduce_precision: see round_to)
        xs = [round_to(jnp.asarray(x).astype(jnp.float32), dt) if i not in exact and x is not None
              and not getattr(x, "ndim", 0) else x for i, x in enumerate(xs)]
    return compute(_meta, *xs)


def in_dtype_of(_meta, v):
    """v rounded to a float16 / bfloat16 result dtype and widened again: an intermediate eager's
    kernel computes as the dtype (xlogy's and xlog1py's logarithm: `std::log(Half)` is a Half)."""
    dt = out_dtype(_meta)
    return round_to(v, dt) if opmath(dt) != dt else v  # (reduce_precision: not narrowed by LLVM)


def _is_weak(x):
    try:
        return bool(jax.core.get_aval(x).weak_type)
    except Exception:  # a Python scalar
        return not hasattr(x, "dtype")


def _category(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return 0
    if jnp.issubdtype(dt, jnp.integer):
        return 1
    if jnp.issubdtype(dt, jnp.floating):
        return 2
    return 3


def _wrapped_default(dt):
    return {0: np.dtype(np.bool_), 1: np.dtype(np.int64), 2: _F32, 3: np.dtype(np.complex64)}[_category(dt)]


def _combine(higher, lower):
    """c10's combine_categories: a lower tier only matters when its category is higher."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _category(higher) == 3:
        return higher
    if _category(lower) == 3:
        return np.dtype(np.complex128) if higher == np.float64 else np.dtype(np.complex64) \
            if _category(higher) == 2 else lower
    if _category(higher) == 2:
        return higher
    if _category(higher) == 0 or _category(lower) == 2:
        return np.dtype(jnp.promote_types(higher, lower))
    return higher


def result_type(*xs):
    """torch.result_type of the arguments: tensors with dims, then 0-d tensors, then Python scalars
    (weakly typed arrays), each lower tier counting only if of a higher category."""
    tiers = [None, None, None]
    for x in xs:
        if x is None:
            continue
        if _is_weak(x):
            tier, dt = 2, _wrapped_default(jnp.asarray(x).dtype)
        else:
            tier, dt = (1 if x.ndim == 0 else 0), np.dtype(x.dtype)
        tiers[tier] = dt if tiers[tier] is None else np.dtype(jnp.promote_types(tiers[tier], dt))
    return _combine(tiers[0], _combine(tiers[1], tiers[2]))


# ---------------------------------------------------------------- unary

def _unary(*ops, ints=None):
    """Register fn(x) computed in the opmath of the result dtype. `ints`: what an integer or bool
    input gives when the result keeps its dtype (e.g. identity for floor)."""
    def deco(fn):
        def low(x, *args, _meta):
            dt = out_dtype(_meta)
            if ints is not None and not is_float(dt):
                return ints(cast(dt, x))
            if jnp.iscomplexobj(x) and not jnp.issubdtype(dt, jnp.complexfloating):
                return fn(x, *args)  # abs of a complex number: a real result of the complex value
            return fn(compute(_meta, x), *args)
        register(*ops, meta=True)(low)
        return fn
    return deco


_ident = lambda x: x  # noqa: E731
_SIMPLE = {
    aten.exp.default: jnp.exp, aten.exp2.default: in_double(jnp.exp2),
    aten.expm1.default: jnp.expm1,
    aten.log.default: jnp.log, aten.log2.default: jnp.log2, aten.log10.default: jnp.log10,
    aten.log1p.default: jnp.log1p, aten.sqrt.default: conj_cut(jnp.sqrt),
    aten.rsqrt.default: lax.rsqrt,
    aten.sin.default: jnp.sin, aten.cos.default: jnp.cos, aten.tan.default: jnp.tan,
    aten.asin.default: conj_cut(jnp.arcsin), aten.acos.default: conj_cut(jnp.arccos),
    aten.atan.default: jnp.arctan,
    aten.sinh.default: in_double(jnp.sinh), aten.cosh.default: in_double(jnp.cosh),
    aten.tanh.default: jnp.tanh,
    aten.asinh.default: odd_cut(jnp.arcsinh), aten.acosh.default: conj_cut(jnp.arccosh),
    aten.atanh.default: jnp.arctanh,
    aten.sigmoid.default: lambda x: 1 / (1 + jnp.exp(-x)),
    aten.erf.default: lax.erf, aten.erfc.default: in_double(lax.erfc),
    aten.erfinv.default: in_double(lax.erf_inv),
    aten.lgamma.default: in_double(lax.lgamma),
    aten.reciprocal.default: lambda x: 1 / x,
    aten.frac.default: lambda x: x - jnp.trunc(x),
    aten.i0.default: lambda x: lax.bessel_i0e(x) * jnp.exp(jnp.abs(x)),
    aten.special_i0e.default: lax.bessel_i0e,
    aten.special_i1.default: lambda x: lax.bessel_i1e(x) * jnp.exp(jnp.abs(x)),
}
for _op, _fn in _SIMPLE.items():
    _unary(_op)(_fn)

_unary(aten.floor.default, ints=_ident)(jnp.floor)
_unary(aten.ceil.default, ints=_ident)(jnp.ceil)
_unary(aten.trunc.default, ints=_ident)(jnp.trunc)
_unary(aten.round.default, ints=_ident)(jnp.round)  # half to even, as nearbyint
_unary(aten.abs.default, ints=lambda x: x if is_bool(x.dtype) else jnp.abs(x))(complex_abs)
_unary(aten.neg.default, ints=lambda x: -x)(lambda x: -x)
_relu = lambda x: jnp.maximum(x, jnp.zeros((), x.dtype))  # noqa: E731  (NaN-propagating)
_unary(aten.relu.default, ints=_relu)(_relu)


def _sign(x):
    if is_bool(x.dtype):
        return x
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)  # sign(nan) == 0, as PyTorch


_unary(aten.sign.default, ints=_sign)(_sign)


def _sgn(x):
    if jnp.iscomplexobj(x):  # x / |x|, 0 at 0
        a = jnp.abs(x)
        return jnp.where(a == 0, jnp.zeros((), x.dtype), x / jnp.where(a == 0, 1, a).astype(x.dtype))
    return _sign(x)


_unary(aten.sgn.default, ints=_sgn)(_sgn)
_unary(aten.conj_physical.default, ints=jnp.conj)(jnp.conj)


@register(aten.round.decimals, meta=True)
def round_decimals(x, decimals=0, _meta=None):
    x = compute(_meta, x)
    if decimals == 0:
        return jnp.round(x)
    # eager: nearbyint(x * 10^d) / 10^d (nearbyint(x / 10^d) * 10^d for negative d) in opmath,
    # 10^d rounded to it, inf where it overflows (NaN results). Divided exactly: XLA would
    # multiply by the reciprocal, a rounding apart in a quarter of float32 results.
    p = abs(decimals)
    ten = 10.0 ** p if p <= 308 else math.inf
    ten = jnp.asarray(ten if ten <= float(np.finfo(x.dtype).max) else math.inf, x.dtype)
    div = Arith(x.dtype).div
    return jnp.round(div(x, ten)) * ten if decimals < 0 else div(jnp.round(x * ten), ten)


@register(aten.logit.default, meta=True)
def logit(x, eps=None, _meta=None):
    low = out_dtype(_meta)
    x = compute(_meta, x)
    # float16 / bfloat16: eager's kernel rounds every step to the dtype
    r = rounder(low, x.dtype) if low in _HALF else (lambda v: v)  # noqa: E731
    if eps is not None:
        x = r(jnp.clip(x, eps, 1 - eps))
    return jnp.log(r(x / r(1 - x)))


@register(aten.digamma.default, meta=True)
def digamma(x, _meta):
    x = compute(_meta, x)
    # PyTorch: digamma(+-0) = -+inf (the limit from the other side), not NaN.
    return jnp.where(x == 0, jnp.copysign(jnp.asarray(jnp.inf, x.dtype), -x), in_double(lax.digamma)(x))


_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)
_MACHEP = 1.11022302462515654042e-16


def zeta(x, q):
    """Hurwitz zeta(x, q), PyTorch's (Cephes') algorithm step for step in the dtype of x and q:
    direct sum until q + i > 9 (and at least 9 terms, so negative q is summed up past its poles),
    then Euler-Maclaurin. jax.scipy.special.zeta's fixed 9-term sum is wrong for q < -9."""
    dt = jnp.result_type(x, q)
    x, q = jnp.broadcast_arrays(x.astype(dt), q.astype(dt))
    one = jnp.ones((), dt)
    s0 = q ** -x

    # direct sum; `fin` marks elements that converged inside it (their s is final)
    init = (jnp.zeros((), jnp.int32), q, jnp.zeros_like(q), s0, jnp.zeros(q.shape, bool),
            jnp.zeros(q.shape, bool))

    def body2(c):
        i, a, b, s, done, fin = c
        go = ~done
        a1 = a + one
        b1 = a1 ** -x
        s1 = s + b1
        conv = jnp.abs(b1 / s1) < _MACHEP
        stop = ~((i + 1 < 9) | (a1 <= 9.0))
        a, b, s = (jnp.where(go, n, o) for n, o in ((a1, a), (b1, b), (s1, s)))
        return i + 1, a, b, s, done | (go & (conv | stop)), fin | (go & conv)

    _, a, b, s, _, fin = lax.while_loop(lambda c: jnp.any(~c[4]), body2, init)
    w = a
    s = s + b * w / (x - one)
    s = s - 0.5 * b
    a = one
    k = jnp.zeros((), dt)
    for coef in _ZETA_A:
        a = a * (x + k)
        b = b / w
        t = a * b / jnp.asarray(coef, dt)
        s_new = s + t
        s = jnp.where(fin, s, s_new)
        fin = fin | (jnp.abs(t / s_new) < _MACHEP)
        k = k + one
        a = a * (x + k)
        b = b / w
        k = k + one
    inf = jnp.asarray(jnp.inf, dt)
    nan = jnp.asarray(jnp.nan, dt)
    out = jnp.where(q <= 0, jnp.where(q == jnp.floor(q), inf, jnp.where(x != jnp.floor(x), nan, s)), s)
    out = jnp.where(x < 1, nan, out)
    return jnp.where(x == 1, inf, out)


@register(aten.special_zeta.default, aten.special_zeta.self_scalar, aten.special_zeta.other_scalar,
          meta=True)
def special_zeta(x, q, _meta):
    x, q = compute(_meta, x, q)
    return zeta(x, q)


def trigamma(x):
    """PyTorch's CPU calc_trigamma: reflection below 0.5, six recurrence steps, asymptotic series."""
    dt = x.dtype
    pi = jnp.asarray(np.pi, dt)
    refl = x < 0.5
    sin_pi_x = jnp.sin(pi * x)
    result = jnp.where(refl, -(pi * pi) / (sin_pi_x * sin_pi_x), jnp.zeros((), dt))
    x = jnp.where(refl, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    c = lambda v: jnp.asarray(v, dt)  # noqa: E731
    result = result + (1 + 1 / (2 * x) + ixx * (c(1 / 6) - ixx * (c(1 / 30) - ixx * c(1 / 42)))) / x
    return jnp.where(refl, -result, result)


@register(aten.polygamma.default, meta=True)
def polygamma(n, x, _meta):
    x = compute(_meta, x)
    if n == 0:
        return digamma(x, _meta=_meta)
    if n == 1:
        return trigamma(x)
    # PyTorch: (-1)^(n+1) n! zeta(n+1, x), with n! as exp(lgamma(n+1)) in the input dtype
    sign = 1.0 if n % 2 else -1.0
    fact = jnp.exp(lax.lgamma(jnp.asarray(n + 1.0, x.dtype)))
    return sign * fact * zeta(jnp.asarray(n + 1.0, x.dtype), x)


@register(aten.sinc.default, meta=True)
def sinc(x, _meta):
    x = compute(_meta, x)
    px = x * jnp.asarray(math.pi, x.dtype)
    return jnp.where(x == 0, jnp.ones_like(x), jnp.sin(px) / jnp.where(x == 0, 1, px))


@register(aten.bitwise_not.default)
def bitwise_not(x):
    return jnp.invert(x)


@register(aten.logical_not.default)
def logical_not(x):
    return x == 0


@register(aten.isnan.default)
def isnan(x):
    return x != x


@register(aten.isinf.default)
def isinf(x):
    if jnp.iscomplexobj(x):  # eager: either part infinite
        return jnp.isinf(x.real) | jnp.isinf(x.imag)
    return jnp.isinf(x) if is_float(x.dtype) else jnp.zeros(x.shape, bool)


@register(aten.isposinf.default)
def isposinf(x):
    return x == jnp.inf if is_float(x.dtype) else jnp.zeros(x.shape, bool)


@register(aten.isneginf.default)
def isneginf(x):
    return x == -jnp.inf if is_float(x.dtype) else jnp.zeros(x.shape, bool)


@register(aten.signbit.default)
def signbit(x):
    if is_float(x.dtype):
        return jnp.signbit(x)
    if is_bool(x.dtype) or not jnp.issubdtype(x.dtype, jnp.signedinteger):
        return jnp.zeros(x.shape, bool)
    return x < 0


@register(aten.nan_to_num.default)
def nan_to_num(x, nan=None, posinf=None, neginf=None):
    if jnp.iscomplexobj(x):  # eager replaces in each part, with the real dtype's extremes
        return lax.complex(nan_to_num(x.real, nan, posinf, neginf), nan_to_num(x.imag, nan, posinf, neginf))
    if not is_float(x.dtype):
        return x
    fi = jnp.finfo(x.dtype)
    nan = 0.0 if nan is None else nan
    posinf = fi.max if posinf is None else posinf
    neginf = fi.min if neginf is None else neginf
    x = jnp.where(x != x, jnp.asarray(nan).astype(x.dtype), x)
    x = jnp.where(x == jnp.inf, jnp.asarray(posinf).astype(x.dtype), x)
    return jnp.where(x == -jnp.inf, jnp.asarray(neginf).astype(x.dtype), x)


# ---------------------------------------------------------------- clamping and selection

def _real_bounds_meta(op):
    """clamp of a floating tensor keeps its dtype whatever its bounds: eager takes a complex bound
    as its real part (one with an imaginary part fails checks.py's value check). PyTorch's meta
    kernel promotes to complex."""
    def kernel(x, min=None, max=None):
        if x.dtype.is_floating_point:
            min, max = (b.real if type(b) is complex else b for b in (min, max))
        return op(x, min, max)
    return kernel


for _op in (aten.clamp.default, aten.clamp_.default):
    meta.META_KERNELS[_op] = _real_bounds_meta(_op)


def _real_fill_meta(op):
    """masked_fill of a real tensor with a complex value: eager converts the value (checks.py
    raises eager's error for one with an imaginary part, bool takes any); PyTorch's meta kernel
    refuses any complex value."""
    def kernel(x, mask, value):
        if not x.is_complex():
            if type(value) is complex:
                value = value.real
            elif isinstance(value, torch.Tensor) and value.is_complex():
                value = torch.empty((), dtype=value.real.dtype, device=value.device)
        return op(x, mask, value)
    return kernel


for _op in (aten.masked_fill.Scalar, aten.masked_fill_.Scalar, aten.masked_fill.Tensor,
            aten.masked_fill_.Tensor):
    meta.META_KERNELS[_op] = _real_fill_meta(_op)


@register(aten.clamp.default, aten.clamp.Tensor, meta=True)
def clamp(x, min=None, max=None, _meta=None):
    x, lo, hi = cast(out_dtype(_meta), x, min, max)
    if lo is not None:
        x = jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.minimum(x, hi)
    return x


@register(aten.clamp_min.default, aten.clamp_min.Tensor, meta=True)
def clamp_min(x, min, _meta):
    return jnp.maximum(*cast(out_dtype(_meta), x, min))


@register(aten.clamp_max.default, aten.clamp_max.Tensor, meta=True)
def clamp_max(x, max, _meta):
    return jnp.minimum(*cast(out_dtype(_meta), x, max))


@register(aten.where.self, meta=True)
def where(cond, x, y, _meta):
    x, y = cast(out_dtype(_meta), x, y)
    return jnp.where(cond.astype(bool), x, y)


def _where_meta(cond, x, y):
    """Eager takes a uint8 condition (deprecated: it warns and reads nonzero as True); PyTorch's
    meta kernel refuses one ("expected predicate to be bool")."""
    if cond.dtype == torch.uint8:
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and "
                      "will be removed in a future version of PyTorch. Use a boolean condition "
                      "instead.")
        cond = torch.empty(cond.shape, dtype=torch.bool, device="meta")
    return aten.where.self(cond, x, y)


meta.META_KERNELS[aten.where.self] = _where_meta


@register(aten.masked_fill.Scalar, meta=True)
def masked_fill(x, mask, value, _meta):
    dt = out_dtype(_meta)
    return jnp.where(mask.astype(bool), cast(dt, value), cast(dt, x))


@register(aten.masked_fill.Tensor, meta=True)
def masked_fill_tensor(x, mask, value, _meta):
    """A 0-d tensor value, known only here (a Python one is checked at the call): eager converts
    its `.item()` with an overflow check."""
    if jnp.iscomplexobj(value) and not jnp.iscomplexobj(x) and x.dtype != jnp.bool_:
        check_values(jnp.imag(value) != 0, COMPLEX_VALUE)
    check_fits(value, out_dtype(_meta))
    return masked_fill(x, mask, value, _meta=_meta)


# ---------------------------------------------------------------- comparisons and logic

def _compare(fn):
    def low(x, y):
        dt = result_type(x, y)
        return fn(*cast(dt, x, y))
    return low


for _name, _fn in (("eq", jnp.equal), ("ne", jnp.not_equal), ("lt", jnp.less),
                   ("le", jnp.less_equal), ("gt", jnp.greater), ("ge", jnp.greater_equal)):
    _packet = getattr(aten, _name)
    register(_packet.Tensor, _packet.Scalar)(_compare(_fn))


def _logical(fn):
    def low(x, y):
        # in the promoted dtype, as eager: a 0-d int64 256 against int8 is 0, so False
        x, y = cast(result_type(x, y), x, y)
        return fn(x != 0, y != 0)
    return low


register(aten.logical_and.default)(_logical(jnp.logical_and))
register(aten.logical_or.default)(_logical(jnp.logical_or))
register(aten.logical_xor.default)(_logical(jnp.logical_xor))


def _bitwise(fn):
    def low(x, y, _meta):
        return fn(*cast(out_dtype(_meta), x, y))
    return low


register(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_and.Scalar_Tensor,
         meta=True)(_bitwise(jnp.bitwise_and))
register(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.bitwise_or.Scalar_Tensor,
         meta=True)(_bitwise(jnp.bitwise_or))
register(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.bitwise_xor.Scalar_Tensor,
         meta=True)(_bitwise(jnp.bitwise_xor))


def _shift_left(x, y):
    # Out-of-range and negative shift amounts give 0 (XLA and PyTorch agree).
    return lax.shift_left(*jnp.broadcast_arrays(x, y))


def _shift_right(x, y):
    x, y = jnp.broadcast_arrays(x, y)
    if jnp.issubdtype(x.dtype, jnp.signedinteger):
        return lax.shift_right_arithmetic(x, y)  # >= bit width: sign fill, as PyTorch
    return lax.shift_right_logical(x, y)


register(aten.bitwise_left_shift.Tensor, aten.bitwise_left_shift.Tensor_Scalar,
         aten.bitwise_left_shift.Scalar_Tensor, aten.__lshift__.Tensor, aten.__lshift__.Scalar,
         meta=True)(_bitwise(_shift_left))
register(aten.bitwise_right_shift.Tensor, aten.bitwise_right_shift.Tensor_Scalar,
         aten.bitwise_right_shift.Scalar_Tensor, aten.__rshift__.Tensor, aten.__rshift__.Scalar,
         meta=True)(_bitwise(_shift_right))
# `bools << 1` is int64 in eager, as bitwise_left_shift's; PyTorch's meta kernel of __lshift__ and
# __rshift__ refuses bools
for _op, _as in ((aten.__lshift__.Tensor, aten.bitwise_left_shift.Tensor),
                 (aten.__lshift__.Scalar, aten.bitwise_left_shift.Tensor_Scalar),
                 (aten.__rshift__.Tensor, aten.bitwise_right_shift.Tensor),
                 (aten.__rshift__.Scalar, aten.bitwise_right_shift.Tensor_Scalar)):
    meta.META_KERNELS[_op] = _as


@register(aten._efficientzerotensor.default, meta=True)
def efficientzerotensor(size, *args, _meta, **kwargs):
    """Autograd's zero gradients (sgn, ...): a plain zero array on the device (PyTorch's ZeroTensor
    is an optimisation its CPU fallback cannot copy)."""
    return jnp.zeros(_meta[0][0], out_dtype(_meta))


@register(aten.angle.default, meta=True)
def angle(x, _meta):
    if jnp.iscomplexobj(x):
        return jnp.angle(x)
    x = compute(_meta, x)
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, jnp.asarray(np.pi, x.dtype),
                                                 jnp.zeros((), x.dtype)))

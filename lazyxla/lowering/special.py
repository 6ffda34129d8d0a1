"""torch.special functions without a home in pointwise.py: jax.scipy.special where it has them, and
the orthogonal polynomials by PyTorch's own recurrences (n is a tensor: a while loop up to max(n),
updating the elements whose degree is not yet reached), with the same special cases at |x| == 1
and the same closed forms for high degrees inside (-1, 1)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
from jax import lax

from .accurate_forms import in_double
from .pointwise import compute, in_dtype_of, narrowed
from .registry import aten, register


def _unary(op, fn):
    def low(x, _meta):
        return fn(compute(_meta, x))
    register(op, meta=True)(low)


def _entr(x):
    return jnp.where(x > 0, -x * jnp.log(jnp.where(x > 0, x, 1)),
                     jnp.where(x == 0, jnp.zeros((), x.dtype), jnp.where(x < 0, -jnp.inf, x)))


def _sph_j0(x):
    safe = jnp.where(x == 0, jnp.ones((), x.dtype), x)
    return jnp.where(jnp.isinf(x), jnp.zeros((), x.dtype),
                     jnp.where(x == 0, jnp.ones((), x.dtype), jnp.sin(safe) / safe))


# exp(x^2) erfc(x) in double: JAX's float32 erfcx is 0 on [9.195, 9.419] (and log_ndtr, built
# on it, -inf on [-13.32, -13.00])
_erfcx = in_double(jsp.erfcx)


def _log_ndtr(x):
    """log(ndtr(x)) as eager computes it: log1p(-erfc(x / sqrt 2) / 2) from x = -1 up (JAX's
    float32 log_ndtr takes log(ndtr(x)) below 5, which cancels: 4% off at x = 5), the scaled erfc
    below, where ndtr underflows."""
    t = x * jnp.asarray(0.7071067811865476, x.dtype)
    low = x < -1
    tl = jnp.where(low, t, -jnp.ones((), x.dtype))  # (the other branch's t, kept finite)
    return jnp.where(low, jnp.log(_erfcx(-tl) / 2) - tl * tl, jnp.log1p(-jsp.erfc(t) / 2))


for _op, _fn in {
    aten.special_entr.default: _entr,
    aten.special_erfcx.default: _erfcx,
    aten.special_log_ndtr.default: _log_ndtr,
    aten.special_ndtri.default: jsp.ndtri,
    aten.special_ndtr.default: jsp.ndtr,
    aten.special_i1e.default: lax.bessel_i1e,
    aten.special_modified_bessel_i0.default: lambda x: lax.bessel_i0e(x) * jnp.exp(jnp.abs(x)),
    aten.special_modified_bessel_i1.default: lambda x: lax.bessel_i1e(x) * jnp.exp(jnp.abs(x)),
    aten.special_spherical_bessel_j0.default: _sph_j0,
}.items():
    _unary(_op, _fn)


@register(aten.special_entr.default, meta=True)
def entr(x, _meta):
    """-x log x, with the log rounded to a half dtype as eager's kernel has it (PyTorch's reference
    decomposition computed it in float32)."""
    x = compute(_meta, x)
    r = jnp.where(x > 0, -x * in_dtype_of(_meta, jnp.log(jnp.where(x > 0, x, 1))),
                  jnp.where(x == 0, jnp.zeros((), x.dtype), jnp.full((), -jnp.inf, x.dtype)))
    return jnp.where(jnp.isnan(x), x, r)


@register(aten.special_xlog1py.default, aten.special_xlog1py.self_scalar,
          aten.special_xlog1py.other_scalar, meta=True)
def xlog1py(x, y, _meta):
    x, y = narrowed(_meta, x, y)
    r = x * in_dtype_of(_meta, jnp.log1p(y))
    return jnp.where(jnp.isnan(y), y, jnp.where(x == 0, jnp.zeros((), x.dtype), r))


# ---------------------------------------------------------------- orthogonal polynomials

def _recurrence(x, n, p0, p1, step, first=2):
    """q_n for q_0 = p0, q_1 = p1, q_k = step(k, x, q_{k-2}, q_{k-1}) (k from `first`, applied while
    k <= n elementwise). n: int64 array broadcast with x."""
    kmax = jnp.max(n, initial=0)

    def body(c):
        k, p, q = c
        r = step(k.astype(x.dtype), x, p, q)
        go = k <= n
        return k + 1, jnp.where(go, q, p), jnp.where(go, r, q)

    _, _, q = lax.while_loop(lambda c: c[0] <= kmax, body,
                             (jnp.asarray(first, n.dtype), p0, p1))
    return q


def _poly(*ops):
    def deco(fn):
        def low(x, n, _meta):
            x, nf = compute(_meta, x, n)
            x, nf = jnp.broadcast_arrays(x, nf)
            ni = jnp.trunc(nf).astype(jnp.int64) if jnp.issubdtype(nf.dtype, jnp.floating) \
                else nf.astype(jnp.int64)
            return fn(x, ni)
        packet = ops[0]
        register(packet.default, packet.x_scalar, packet.n_scalar, meta=True)(low)
        return fn
    return deco


def _sel(*pairs, default):
    out = default
    for cond, val in reversed(pairs):
        out = jnp.where(cond, val, out)
    return out


def _f(x, v):
    return jnp.asarray(v, x.dtype) if not hasattr(v, "dtype") else v.astype(x.dtype)


def _cheb(x, n, first_q, edge, closed, threshold):
    """Chebyshev T/U/V/W: p0 = 1, p1 = first_q, r = 2x q - p; edge(x, n) at |x| == 1; closed(x, n)
    (or None where it does not apply) for n > threshold and |x| < 1."""
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, first_q, lambda k, x, p, q: (x + x) * q - p)
    closed_v, closed_ok = closed(x, n)
    return _sel((n < 0, jnp.zeros_like(x)), (jnp.abs(x) == 1, edge(x, n)),
                ((n > threshold) & (jnp.abs(x) < 1) & closed_ok, closed_v),
                (n == 0, one), (n == 1, first_q), default=rec)


def _odd_sign(x, n, v):
    return jnp.where(n % 2 == 0, v, -v)


def _cheb_t(x, n, threshold=6):
    return _cheb(x, n, x, lambda x, n: jnp.where((x > 0) | (n % 2 == 0), 1.0, -1.0).astype(x.dtype),
                 lambda x, n: (jnp.cos(_f(x, n) * jnp.arccos(x)), True), threshold)


def _cheb_u(x, n, threshold=8):
    def closed(x, n):
        a = jnp.arccos(x)
        s = jnp.sin(a)
        v = jnp.where(s != 0, jnp.sin(_f(x, n + 1) * a) / jnp.where(s != 0, s, 1),
                      _f(x, n + 1) * jnp.cos(_f(x, n + 1) * a) / x)
        return v, True
    return _cheb(x, n, x + x,
                 lambda x, n: jnp.where((x > 0) | (n % 2 == 0), _f(x, n + 1), -_f(x, n + 1)),
                 closed, threshold)


def _cheb_v(x, n, threshold=8):
    def closed(x, n):
        a = jnp.arccos(x)
        ok = jnp.sin(a / 2) != 1
        v = jnp.where(ok, jnp.cos((_f(x, n) + 0.5) * a) / jnp.cos(a / 2),
                      _odd_sign(x, n, _f(x, n + n + 1)))
        return v, True
    return _cheb(x, n, x + x - 1,
                 lambda x, n: jnp.where(x > 0, jnp.ones_like(x), _odd_sign(x, n, _f(x, n + n + 1))),
                 closed, threshold)


def _cheb_w(x, n, threshold=8):
    def closed(x, n):
        a = jnp.arccos(x)
        ok = jnp.cos(a / 2) != 1
        v = jnp.where(ok, jnp.sin((_f(x, n) + 0.5) * a) / jnp.sin(a / 2),
                      jnp.where(x > 0, _f(x, n + n + 1), _odd_sign(x, n, jnp.ones_like(x))))
        return v, True
    return _cheb(x, n, x + x + 1,
                 lambda x, n: jnp.where(x > 0, _f(x, n + n + 1), _odd_sign(x, n, jnp.ones_like(x))),
                 closed, threshold)


_poly(aten.special_chebyshev_polynomial_t)(_cheb_t)
_poly(aten.special_chebyshev_polynomial_u)(_cheb_u)
_poly(aten.special_chebyshev_polynomial_v)(_cheb_v)
_poly(aten.special_chebyshev_polynomial_w)(_cheb_w)


@_poly(aten.special_hermite_polynomial_h)
def _hermite_h(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x + x, lambda k, x, p, q: (x + x) * q - (k + k - 2) * p)
    return _sel((n < 0, jnp.zeros_like(x)), (n == 0, one), (n == 1, x + x), default=rec)


@_poly(aten.special_hermite_polynomial_he)
def _hermite_he(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x, lambda k, x, p, q: x * q - (k - 1) * p)
    return _sel((n < 0, jnp.zeros_like(x)), (n == 0, one), (n == 1, x), default=rec)


@_poly(aten.special_laguerre_polynomial_l)
def _laguerre(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, one - x,
                      lambda k, x, p, q: (((k - 1) + (k - 1) + (1 - x)) * q - (k - 1) * p) / k)
    return _sel((n < 0, jnp.zeros_like(x)), (jnp.abs(x) == 0, one), (n == 0, one),
                (n == 1, one - x), default=rec)


@_poly(aten.special_legendre_polynomial_p)
def _legendre(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x,
                      lambda k, x, p, q: ((k + k - 1) * x * q - (k - 1) * p) / k)
    edge = jnp.where((x > 0) | (n % 2 == 0), one, -one)
    return _sel((n < 0, jnp.zeros_like(x)), (jnp.abs(x) == 1, edge), (n == 0, one),
                (n == 1, x), default=rec)


def _shifted(fn, threshold):
    def low(x, n):
        return fn(x + x - 1, n, threshold)
    return low


_poly(aten.special_shifted_chebyshev_polynomial_t)(_shifted(_cheb_t, 6))
_poly(aten.special_shifted_chebyshev_polynomial_u)(_shifted(_cheb_u, 6))
_poly(aten.special_shifted_chebyshev_polynomial_v)(_shifted(_cheb_v, 6))
_poly(aten.special_shifted_chebyshev_polynomial_w)(_shifted(_cheb_w, 6))

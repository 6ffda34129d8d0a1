"""Complex functions where XLA's answer differs from C99's, which eager's CPU kernels follow:
the side of a branch cut for a signed zero part, and |z| of an infinite part beside a NaN.
Real inputs take the function itself."""
from __future__ import annotations

import jax.numpy as jnp


def conj_cut(fn):
    """fn with eager's (C99's) side of a branch cut along the real axis for a complex x whose
    imaginary part is -0.0: conj(fn(conj(x))), as f(conj(z)) == conj(f(z)) for these functions.
    XLA's complex sqrt/asin/acos/acosh take +0.0's side for both zeros. Real x: fn itself."""
    def f(x):
        if not jnp.iscomplexobj(x):
            return fn(x)
        im = jnp.imag(x)
        flip = (im == 0) & jnp.signbit(im)
        r = fn(jnp.where(flip, jnp.conj(x), x))
        return jnp.where(flip, jnp.conj(r), r)
    return f


def odd_cut(fn):
    """fn (odd) with eager's side of a branch cut along the imaginary axis for a complex x whose
    real part is -0.0: -fn(-x) (XLA's asinh takes +0.0's side for both zeros)."""
    def f(x):
        if not jnp.iscomplexobj(x):
            return fn(x)
        re = jnp.real(x)
        flip = (re == 0) & jnp.signbit(re)
        r = fn(jnp.where(flip, -x, x))
        return jnp.where(flip, -r, r)
    return f


def complex_abs(x):
    """|x|; a complex x with an infinite part is inf even where the other is NaN (C99's hypot,
    eager's), where XLA's gives NaN."""
    if not jnp.iscomplexobj(x):
        return jnp.abs(x)
    a = jnp.abs(x)
    inf = jnp.isinf(jnp.real(x)) | jnp.isinf(jnp.imag(x))
    return jnp.where(inf, jnp.full((), jnp.inf, a.dtype), a)

"""Forms of functions whose XLA versions differ from eager's: complex functions where XLA's
answer differs from C99's, which eager's CPU kernels follow (the side of a branch cut for a signed
zero part, |z| of an infinite part beside a NaN; real inputs take the function itself), and
float32 transcendentals XLA computes less accurately than eager (computed in double)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np


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


_WIDER = {np.dtype(np.float32): jnp.float64, np.dtype(np.complex64): jnp.complex128}


def in_double(fn):
    """fn of a float32 (complex64) x computed in double and rounded once: XLA's float32 forms
    of these are 24 to 68 ulp off at large arguments (sinh(30), exp2(100.3), erfc(8.4),
    erfinv(0.9999)) and 5500 ulp beside lgamma's zeros (x = 1.001), where eager's are within an
    ulp."""
    def f(x):
        wide = _WIDER.get(np.dtype(x.dtype))
        return fn(x) if wide is None else fn(x.astype(wide)).astype(x.dtype)
    return f

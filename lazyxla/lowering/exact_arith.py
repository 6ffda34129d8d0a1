"""Floating-point arithmetic as PyTorch's CPU kernels round it, for lowerings that must match
eager bit for bit: half and bfloat16 rounded after every operation (c10's operators), divisions
kept as divisions (XLA turns a division by a broadcast value into a multiplication by its
reciprocal), and fused multiply-adds computed exactly (error-free sums, rounding to odd).
linspace is built on it: eager computes each element as one fused multiply-add."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_REDUCED = {np.dtype(np.float16): (5, 10)}
try:
    import ml_dtypes
    _REDUCED[np.dtype(ml_dtypes.bfloat16)] = (8, 7)
except ImportError:  # pragma: no cover
    pass


# ---------------------------------------------------------------- arithmetic of the input dtype

def round_to(v, dtype):
    """float32 `v` rounded to the values of `dtype` (float16 or bfloat16: nearest, ties to even;
    subnormals kept; overflow to inf), still float32. Not `v.astype(dtype).astype(float32)`: on a
    CPU with native float16 arithmetic (AVX512-FP16) LLVM narrows that round trip and the float32
    operations around it to float16 operations, then fuses a multiply and the add that uses it into
    one FMA, which rounds once where eager rounds twice. reduce_precision is bit arithmetic it
    cannot narrow (for bfloat16 it equals the conversion on every value tried, NaN included)."""
    dtype = np.dtype(dtype)
    if dtype != np.float16:
        return lax.reduce_precision(v, *_REDUCED[dtype])
    return _round_to_float16(v)


@jax.custom_vjp
def _round_to_float16(v):
    q = lax.reduce_precision(v, 5, 10)  # (flushes half's subnormals, which are float32 normals)
    return jnp.where(jnp.abs(v) < 2.0 ** -14, jnp.round(v * 2.0 ** 24) * 2.0 ** -24, q)


# Differentiated as reduce_precision is (a lowering's backward taken as the VJP of a forward that
# rounds like eager's kernel): the cotangent rounded alike. jnp.round's zero derivative dropped
# every gradient that passed a value below float16's normals (a partial sum crossing zero).
_round_to_float16.defvjp(lambda v: (_round_to_float16(v), None),
                         lambda _, ct: (_round_to_float16(ct),))


def rounder(dtype, back=jnp.float32):
    """Rounds values computed in a wider float to `dtype` (float16 or bfloat16) and back to
    `back`: what eager's scalar c10::Half / BFloat16 arithmetic does after every operation."""
    return lambda v: round_to(v.astype(jnp.float32), dtype).astype(back)


class Arith:
    """Arithmetic as PyTorch's CPU kernels do it in `dtype`: float32/float64 natively; half and
    bfloat16 in float32, rounded to the dtype after every operation (c10::Half's operators).
    xp: jax.numpy (in the program) or numpy (on the host, for edges fixed by a given range: no
    program code, and numpy divides exactly and keeps subnormals)."""

    def __init__(self, dtype, xp=jnp):
        self.dtype = np.dtype(dtype)
        self.bits = _REDUCED.get(self.dtype)
        self.cd = np.dtype(np.float32) if self.bits else self.dtype  # computing dtype
        self.xp = xp
        self.host = xp is np

    def r(self, v):
        v = self.xp.asarray(v).astype(self.cd)
        if not self.bits:
            return v
        if self.host:
            return v.astype(self.dtype).astype(self.cd)
        return round_to(v, self.dtype)

    def from_double(self, v):
        """A double converted to the dtype (c10 converts to half through float)."""
        v = self.xp.asarray(v, np.float64)
        return self.r(v.astype(np.float32)) if self.bits else v.astype(self.cd)

    def bitcast(self, v, dt):
        return np.asarray(v).view(dt) if self.host else lax.bitcast_convert_type(v, dt)

    def div(self, a, b):
        """a / b rounded once, as eager divides. XLA turns a division by a constant or by a
        broadcast value into a multiplication by its rounded reciprocal (36 / 10 -> 3.6000001 in
        float32), which moves elements across bin edges; a divisor of the full shape behind a
        barrier stays a division."""
        if self.host:
            return a / b
        a, b = jnp.asarray(a), jnp.asarray(b)
        shape = jnp.broadcast_shapes(a.shape, b.shape)
        return jnp.broadcast_to(a, shape) / lax.optimization_barrier(jnp.broadcast_to(b, shape))


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_to_odd(ar: Arith, s, err):
    """s + err (s = fl(s + err), float64) rounded to odd: an inexact s moves to its neighbour
    towards the exact value when its last bit is even. Rounding that to a narrower precision (or
    adding it to a larger number) rounds the exact value correctly."""
    xp = ar.xp
    bits = ar.bitcast(s, np.int64)
    fix = (err != 0) & ((bits & 1) == 0)
    away = (err > 0) == (s > 0)  # the exact value lies farther from zero than s
    bits = xp.where(fix, xp.where(away, bits + 1, bits - 1), bits)
    return ar.bitcast(bits, np.float64)


def _fma64(ar: Arith, a, i, c, nbits):
    """Correctly rounded a * i + c in float64 (a, c float64; i integers below 2**nbits <= 2**26).
    a splits into a high part with nbits low mantissa bits cleared and the rest, so that both
    products with i are exact; the three-term sum is Boldo and Melquiond's (round to odd)."""
    mask = np.int64(~((1 << nbits) - 1))
    hi = ar.bitcast(ar.bitcast(a, np.int64) & mask, np.float64)
    lo = a - hi
    i = i.astype(np.float64)
    uh, ul = _two_sum(hi * i, lo * i)
    th, tl = _two_sum(c, uh)
    v = _round_to_odd(ar, *_two_sum(tl, ul))
    # an infinite step or end has no split (inf - inf): the plain expression gives eager's inf / NaN
    return ar.xp.where(ar.xp.isfinite(a) & ar.xp.isfinite(c), th + v, a * i + c)


def _fma(ar: Arith, a, i, c, nbits):
    """a * i + c rounded once to the dtype (what the CPU kernel's contracted expression gives);
    half and bfloat16: two roundings, as c10's operators."""
    if ar.bits:
        return ar.r(c + ar.r(a * ar.r(i.astype(np.float32))))
    if ar.dtype == np.float64:
        return _fma64(ar, a, i, c, nbits)
    p = a.astype(np.float64) * i.astype(np.float64)  # exact (24 + 26 bits)
    return _round_to_odd(ar, *_two_sum(p, c.astype(np.float64))).astype(np.float32)


def linspace(ar: Arith, start, end, steps):
    """linspace(start, end, steps) as PyTorch's CPU kernel computes it; start and end are already
    in the dtype."""
    xp = ar.xp
    if steps == 1:
        return xp.reshape(start, (1,))
    step = ar.r(ar.div(ar.r(end - start), ar.r(xp.asarray(steps - 1, np.float64))))
    i = xp.arange(steps, dtype=np.int64)
    nbits = max(int(steps).bit_length(), 1)
    lo = _fma(ar, step, i, start, nbits)
    hi = _fma(ar, -step, steps - 1 - i, end, nbits)
    return xp.where(i < steps // 2, lo, hi)

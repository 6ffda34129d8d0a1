"""Upsampling: nearest (a gather), linear, cubic and antialiased (separable resampling, one
(out, in) weight matrix per spatial dim, built on the host from the static sizes).

float16 / bfloat16 accumulate in float32 and round once; eager's generic kernel stores its
weights in the dtype, and so do these where eager uses it.

uint8 images follow eager's integer path instead of computing in float: per dim, weights in
double become int16 at a precision chosen from the largest weight, each output is
(sum(pixel * weight) + half) >> precision clamped to 0..255, and every pass rounds to uint8 before
the next (last dim first). Computing in float and rounding once differs from eager by up to ~100
for bicubic, whose overshoot eager clamps between passes."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.jaxenv import type_name

from .checks import check
from .nn import _vjp
from .registry import aten, register

HIGHEST = lax.Precision.HIGHEST


def _src_scale(n_in, n_out, align_corners, scale):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return n_in / n_out


def _scales(nd, *s):
    s = list(s) + [None] * nd
    return s[:nd]


# ---------------------------------------------------------------- nearest

def _nearest_index(n_in, n_out, scale, exact=False):
    s = _src_scale(n_in, n_out, False, scale)
    o = np.arange(n_out, dtype=np.float64)
    if exact:
        src = np.floor((o + 0.5) * np.float32(s))
    else:
        src = np.floor(o * np.float32(s))
    return np.minimum(src.astype(np.int64), n_in - 1)


def _upsample_nearest(x, output_size, scales, exact=False):
    nd = len(output_size)
    out = x
    for i, o in enumerate(output_size):
        ax = x.ndim - nd + i
        out = jnp.take(out, jnp.asarray(_nearest_index(x.shape[ax], o, scales[i], exact)), axis=ax)
    return out


# ---------------------------------------------------------------- weight matrices (float path)

def _linear_matrix(n_in, n_out, align_corners, scale):
    s = float(np.float32(_src_scale(n_in, n_out, align_corners, scale)))  # eager's opmath float
    o = np.arange(n_out, dtype=np.float64)
    src = o * s if align_corners else np.maximum(s * (o + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = i0 + (i0 < n_in - 1)
    l1 = src - i0
    m = np.zeros((n_out, n_in))
    m[np.arange(n_out), i0] += 1.0 - l1
    m[np.arange(n_out), i1] += l1
    return m


def _keys_cubic(x, a):
    """Keys' cubic convolution kernel at |x| (a = -0.75 as OpenCV, -0.5 as PIL)."""
    x = np.abs(x)
    return np.where(x <= 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                    np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))


def _cubic_matrix(n_in, n_out, align_corners, scale):
    """Bicubic (A = -0.75) weights with border-clamped taps, as PyTorch's upsample_bicubic2d."""
    s = float(np.float32(_src_scale(n_in, n_out, align_corners, scale)))
    o = np.arange(n_out, dtype=np.float64)
    src = o * s if align_corners else s * (o + 0.5) - 0.5
    i0 = np.floor(src).astype(np.int64)
    t = src - i0
    m = np.zeros((n_out, n_in))
    for k, w in enumerate(_keys_cubic(np.stack([t + 1, t, 1 - t, 2 - t]), -0.75)):
        np.add.at(m, (np.arange(n_out), np.clip(i0 - 1 + k, 0, n_in - 1)), w)
    return m


# float16 / bfloat16 through eager's generic kernel (linear1d, trilinear3d, bicubic2d, and
# bilinear2d with out_h + out_w > 128): weights computed in float32 and stored in the dtype.

def _fma32(a, b, c):
    """float32 fused multiply-add (the product is exact in float64)."""
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32)


def _src_scale32(n_in, n_out, align_corners, scale):
    """_src_scale as eager computes it in float32 (area_pixel_compute_scale<float>)."""
    f = np.float32
    if align_corners:
        return f(n_in - 1) / f(n_out - 1) if n_out > 1 else f(0)
    if scale is not None and scale > 0:
        return f(1.0 / scale)
    return f(n_in) / f(n_out)


def _round_to(v, low):
    """numpy float32 values rounded to the reduced dtype `low` (kept as float32)."""
    return np.asarray(v, np.float32).astype(low).astype(np.float32)


def _linear_matrix_low(n_in, n_out, align_corners, scale, low):
    """Source index and lambda in float32, lambda1 stored in the dtype, lambda0 = 1 - lambda1
    rounded to it too."""
    f = np.float32
    s = _src_scale32(n_in, n_out, align_corners, scale)
    o = np.arange(n_out, dtype=f)
    src = o * s if align_corners else np.maximum(_fma32(s, o + f(0.5), f(-0.5)), f(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    l1 = _round_to(np.clip(src - i0.astype(f), 0, 1), low)
    l0 = _round_to(f(1) - l1, low)
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), i0), l0)
    np.add.at(m, (np.arange(n_out), i0 + (i0 < n_in - 1)), l1)
    return m


def _cubic_matrix_low(n_in, n_out, align_corners, scale, low):
    """float32 arithmetic as eager's compiled kernel does it, fused multiply-adds included
    (matched weight for weight on an AVX2 host), each tap's weight rounded to the dtype."""
    f, a = np.float32, -0.75
    s = _src_scale32(n_in, n_out, align_corners, scale)
    o = np.arange(n_out, dtype=f)
    src = o * s if align_corners else _fma32(s, o + f(0.5), f(-0.5))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    t = np.clip(src - i0.astype(f), f(0), f(1)).astype(f)
    c1 = lambda x: ((_fma32(f(a + 2), x, f(-(a + 3))) * x) * x + f(1)).astype(f)  # noqa: E731
    c2 = lambda x: (_fma32(_fma32(f(a), x, f(-5 * a)), x, f(8 * a)) * x - f(4 * a)).astype(f)  # noqa: E731
    m = np.zeros((n_out, n_in))
    for k, w in enumerate([c2(t + f(1)), c1(t), c1(f(1) - t), c2((f(1) - t) + f(1))]):
        np.add.at(m, (np.arange(n_out), np.clip(i0 - 1 + k, 0, n_in - 1)), _round_to(w, low))
    return m


_LOW_MATRIX = {_linear_matrix: _linear_matrix_low, _cubic_matrix: _cubic_matrix_low}


def _aa_matrix(n_in, n_out, align_corners, scale, cubic):
    """Anti-aliased (PIL-style) resampling weights of _upsample_bilinear2d_aa / _bicubic2d_aa: the
    filter's support widens by the downscaling factor and each row is normalised."""
    s = _src_scale(n_in, n_out, align_corners, scale)
    interp = 4 if cubic else 2
    support = interp * 0.5 * s if s >= 1.0 else interp * 0.5
    inv = 1.0 / s if s >= 1.0 else 1.0
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = s * (i + 0.5)
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), n_in)
        x = (np.arange(xmin, xmax) - center + 0.5) * inv
        w = _keys_cubic(x, -0.5) if cubic else np.maximum(1.0 - np.abs(x), 0.0)
        tot = w.sum()
        m[i, xmin:xmax] = w / tot if tot != 0 else w
    return m


def _resample(x, output_size, align_corners, scales, matrix, generic=False):
    """Separable resampling: one (out, in) weight matrix per spatial dim, applied in turn. float16 /
    bfloat16 accumulate in float32 (opmath) and round once; with `generic` (eager's generic
    kernel) their weights are the dtype's."""
    nd = len(output_size)
    half = x.dtype in (jnp.float16, jnp.bfloat16)
    out = x.astype(jnp.float32) if half else x
    for i, o in enumerate(output_size):
        ax = x.ndim - nd + i
        if half and generic and matrix in _LOW_MATRIX:
            m = _LOW_MATRIX[matrix](x.shape[ax], o, align_corners, scales[i], x.dtype)
        else:
            m = matrix(x.shape[ax], o, align_corners, scales[i])
        m = jnp.asarray(m, out.dtype)
        out = jnp.moveaxis(jnp.tensordot(jnp.moveaxis(out, ax, -1), m.T, axes=1, precision=HIGHEST), -1, ax)
    return out.astype(x.dtype)


# ---------------------------------------------------------------- uint8 (eager's integer path)

def _uint8_taps(n_in, n_out, align_corners, scale, cubic):
    """Eager's uint8 weights without antialiasing, in double: 2 or 4 taps around the source
    point, taps past a border added onto the border pixel. Returns the dense matrix and the
    largest partial sum, which sets the int16 precision."""
    interp = 4 if cubic else 2
    half = interp // 2
    s = _src_scale(n_in, n_out, align_corners, scale)
    m, wmax = np.zeros((n_out, n_in)), 0.0
    for i in range(n_out):
        src = s * i if align_corners else s * (i + 0.5) - 0.5
        if not cubic:
            src = max(src, 0.0)
        idx = min(math.floor(src), n_in - 1)
        lam = min(max(src - idx, 0.0), 1.0)
        lo = idx - half + 1
        start = max(lo, 0)
        size = min(max(min(idx + half + 1, n_in) - start, 0), interp)
        taps = np.arange(interp) + 1 - half - lam
        filt = _keys_cubic(taps, -0.75) if cubic else np.maximum(1.0 - np.abs(taps), 0.0)
        w, slot = np.zeros(interp), 0
        for j in range(interp):
            if lo + j <= 0:
                slot = 0
            elif lo + j >= n_in - 1:
                slot = size - 1
            w[slot] += filt[j]
            wmax = max(wmax, w[slot])
            slot += 1
        m[i, start:start + size] = w[:size]
    return m, wmax


def _int16_weights(m, wmax):
    """Eager's int16 weights: the largest precision (< 22 bits) at which 2 * wmax stays below
    2**15, values rounded half away from zero."""
    prec = next((p for p in range(22) if int(0.5 + wmax * (1 << (p + 1))) >= 1 << 15), 22)
    v = m * (1 << prec)
    return np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int32), prec


def _resample_uint8(x, output_size, align_corners, scales, mode, antialias):
    nd = len(output_size)
    out = x
    for i in [nd - 1] + list(range(nd - 2, -1, -1)):  # the last (contiguous) dim first, as eager
        ax = x.ndim - nd + i
        n_in, n_out = x.shape[ax], output_size[i]
        if n_in == n_out:  # eager skips the pass: no rounding, whatever the scale
            continue
        if antialias:
            m = _aa_matrix(n_in, n_out, align_corners, scales[i], mode == "bicubic")
            wmax = m.max(initial=0.0)
        else:
            m, wmax = _uint8_taps(n_in, n_out, align_corners, scales[i], mode == "bicubic")
        w, prec = _int16_weights(m, wmax)
        acc = jnp.tensordot(jnp.moveaxis(out, ax, -1).astype(jnp.int32), jnp.asarray(w.T), axes=1)
        acc = (acc + (1 << (prec - 1))) >> prec
        out = jnp.moveaxis(jnp.clip(acc, 0, 255).astype(jnp.uint8), -1, ax)
    return out


# ---------------------------------------------------------------- registration

_MATRIX = {"bilinear": _linear_matrix, "linear": _linear_matrix, "trilinear": _linear_matrix,
           "bicubic": _cubic_matrix}


def _interpolate(x, output_size, align_corners, scales, mode, antialias):
    if x.dtype == jnp.uint8:
        return _resample_uint8(x, output_size, align_corners, scales, mode, antialias)
    if antialias:
        return _resample(x, output_size, align_corners, scales,
                         lambda *a: _aa_matrix(*a, cubic=mode == "bicubic"))
    # eager's bilinear2d kernel is vectorised (float32 weights) up to out_h + out_w = 128 (and for
    # 3-channel images on one thread: a host setting, not followed), the others are generic
    generic = mode != "bilinear" or sum(output_size) > 128
    return _resample(x, output_size, align_corners, scales, _MATRIX[mode], generic)


_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# name, spatial dims, mode, antialias, dtypes eager's CPU kernel takes, its name in the refusal
_UPSAMPLES = (
    ("upsample_nearest1d", 1, "nearest", False, _FLOATS + (torch.uint8,), "compute_indices_weights_nearest"),
    ("_upsample_nearest_exact1d", 1, "nearest-exact", False, _FLOATS + (torch.uint8,),
     "compute_indices_weights_nearest"),
    ("upsample_nearest2d", 2, "nearest", False, _FLOATS + (torch.uint8,), "upsample_nearest2d_channels_last"),
    ("_upsample_nearest_exact2d", 2, "nearest-exact", False, _FLOATS + (torch.uint8,),
     "upsample_nearest2d_channels_last"),
    ("upsample_nearest3d", 3, "nearest", False, _FLOATS + (torch.uint8,), "compute_indices_weights_nearest"),
    ("_upsample_nearest_exact3d", 3, "nearest-exact", False, _FLOATS + (torch.uint8,),
     "compute_indices_weights_nearest"),
    ("upsample_linear1d", 1, "linear", False, _FLOATS, "compute_indices_weights_linear"),
    ("upsample_bilinear2d", 2, "bilinear", False, _FLOATS + (torch.uint8,), "upsample_bilinear2d_channels_last"),
    ("upsample_trilinear3d", 3, "trilinear", False, _FLOATS, "compute_indices_weights_linear"),
    ("upsample_bicubic2d", 2, "bicubic", False, _FLOATS + (torch.uint8,), "compute_indices_weights_cubic"),
    ("_upsample_bilinear2d_aa", 2, "bilinear", True, (torch.float32, torch.float64, torch.uint8),
     "compute_index_ranges_weights"),
    ("_upsample_bicubic2d_aa", 2, "bicubic", True, (torch.float32, torch.float64, torch.uint8),
     "compute_index_ranges_weights"),
)


def _register_upsample(name, nd, mode, antialias, dtypes, kernel):
    """aten.<name> and aten.<name>_backward (the VJP of the forward), and eager's dtype refusal."""
    nearest = mode.startswith("nearest")

    def split(rest):
        align = False if nearest else rest[0]
        return align, _scales(nd, *(rest if nearest else rest[1:]))

    def fwd(x, output_size, *rest):
        align, scales = split(rest)
        if nearest:  # a gather: exact in every dtype
            return _upsample_nearest(x, output_size, scales, exact=mode == "nearest-exact")
        return _interpolate(x, output_size, align, scales, mode, antialias)

    def bwd(g, output_size, input_size, *rest):
        if nearest and g.dtype in (jnp.float16, jnp.bfloat16):  # eager sums a half dtype's
            # gradient in float32 (opmath) and rounds once
            x = jnp.zeros(tuple(input_size), jnp.float32)
            return _vjp(lambda a: fwd(a, output_size, *rest), [x], g.astype(jnp.float32), [True])[0].astype(g.dtype)
        x = jnp.zeros(tuple(input_size), g.dtype)
        return _vjp(lambda a: fwd(a, output_size, *rest), [x], g, [True])[0]

    def dtype_check(x, *args, **kwargs):
        if x.dtype not in dtypes:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(x.dtype)}'")

    packet = getattr(aten, name)
    register(packet.default)(fwd)
    register(getattr(aten, name + "_backward").default)(bwd)
    check(*[getattr(packet, o) for o in packet.overloads()])(dtype_check)


for _spec in _UPSAMPLES:
    _register_upsample(*_spec)

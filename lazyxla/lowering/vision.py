"""Spatial sampling: grid_sampler_2d / grid_sampler_3d (F.grid_sample) and their backward ops.

Follows PyTorch's CPU kernel: grid coordinates in [-1, 1] are unnormalised to pixel positions
(align_corners chooses corner or edge centres), the padding mode maps them into the image (zeros:
out-of-image taps read 0; border: clamp; reflection: reflect, then clamp), and the interpolation
mode reads taps (bilinear: 2^n corners; nearest: round half to even; bicubic, 2-d only: a 4x4
neighbourhood with Keys' A = -0.75, each tap mapped through the padding mode). Backward ops are
the VJP of the forward (floor/round are constants, as in PyTorch's kernel)."""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp

from .exact_arith import rounder
from .registry import aten, register

_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2


def _unnormalize(c, size, align):
    if align:
        return (c + 1) / 2 * (size - 1)
    return ((c + 1) * size - 1) / 2


def _reflect(c, twice_low, twice_high):
    if twice_low == twice_high:
        return jnp.zeros_like(c)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = jnp.abs(c - lo)
    extra = jnp.fmod(c, span)
    flips = jnp.floor(c / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + lo, span - extra + lo)


def _apply_padding(c, size, padding, align):
    if padding == _BORDER:
        return jnp.clip(c, 0, size - 1)
    if padding == _REFLECTION:
        c = _reflect(c, 0, 2 * (size - 1)) if align else _reflect(c, -1, 2 * size - 1)
        return jnp.clip(c, 0, size - 1)
    return c


def _gather(flat_inp, sp, pos):
    """Values of flat_inp (N, C, prod(sp)) at integer positions pos[k] (N, *out), 0 outside."""
    valid = jnp.ones(pos[0].shape, bool)
    flat = jnp.zeros(pos[0].shape, jnp.int64)
    for p, n in zip(pos, sp):
        valid &= (p >= 0) & (p < n)
        flat = flat * n + jnp.clip(p, 0, n - 1).astype(jnp.int64)
    n_, c_ = flat_inp.shape[:2]
    vals = jnp.take_along_axis(flat_inp, flat.reshape(n_, 1, -1), axis=2)
    vals = vals.reshape((n_, c_) + pos[0].shape[1:])
    return jnp.where(valid[:, None], vals, jnp.zeros((), vals.dtype))


def _cubic_coeffs(t):
    a = -0.75
    c1 = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1  # noqa: E731
    c2 = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a  # noqa: E731
    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def _grid_sample(inp, grid, mode, padding, align):
    sp = inp.shape[2:]
    nd = len(sp)
    grid = grid.astype(inp.dtype)
    flat_inp = inp.reshape(inp.shape[:2] + (-1,))
    # grid[..., 0] is x (the last spatial dim), grid[..., 1] is y, ...
    coords = [_unnormalize(grid[..., nd - 1 - k], sp[k], align) for k in range(nd)]
    if mode == _BICUBIC:
        base = [jnp.floor(c) for c in coords]
        ws = [_cubic_coeffs(c - b) for c, b in zip(coords, base)]
        out = 0
        for taps in itertools.product(range(4), repeat=nd):
            pos = [jnp.floor(_apply_padding(b - 1 + t, n, padding, align)).astype(jnp.int64)
                   for b, t, n in zip(base, taps, sp)]
            w = 1
            for k, t in enumerate(taps):
                w = w * ws[k][t]
            out = out + _gather(flat_inp, sp, pos) * w[:, None]
        return out
    coords = [_apply_padding(c, n, padding, align) for c, n in zip(coords, sp)]
    if mode == _NEAREST:
        return _gather(flat_inp, sp, [jnp.round(c).astype(jnp.int64) for c in coords])
    base = [jnp.floor(c) for c in coords]
    frac = [c - b for c, b in zip(coords, base)]
    out = 0
    for corner in itertools.product((0, 1), repeat=nd):
        w = 1
        for f, b in zip(frac, corner):
            w = w * (f if b else 1 - f)
        pos = [(b + k).astype(jnp.int64) for b, k in zip(base, corner)]
        out = out + _gather(flat_inp, sp, pos) * w[:, None]
    return out


# ---------------------------------------------------------------- float16 / bfloat16
# Eager CPU samples reduced-precision inputs in the input dtype itself: every arithmetic operation
# rounds to it (c10::Half / BFloat16 scalar arithmetic, or Vectorized<Half> ops that convert to
# float and back). The lowerings below compute in float32 and round (`r`) after every operation,
# in the order eager's kernels evaluate: grid_sampler_2d follows the vectorised kernel
# (cpu/GridSamplerKernel.cpp, ApplyGridSample), grid_sampler_3d the scalar one (GridSampler.cpp,
# grid_sampler_3d_cpu_impl), whose formulas differ.

def _clip_low(c, size):
    # clip_coordinates: min(size - 1, max(0, c)); a NaN coordinate becomes 0
    return jnp.where(jnp.isnan(c), 0.0, jnp.clip(c, 0.0, float(size - 1)))


def _loc_vec(g, size, padding, align, r, pad=True):
    """ComputeLocation<scalar_t, padding, align_corners>: unnormalise, then (pad) the padding."""
    if align:
        c = r(r(g + 1) * r(jnp.float32(size - 1) / 2))
    else:
        c = r(r(r(g + 1) * r(jnp.float32(size) / 2)) - 0.5)
    return _pad_vec(c, size, padding, align, r) if pad else c


def _pad_vec(c, size, padding, align, r):
    if padding == _BORDER:
        return _clip_low(c, size)
    if padding == _REFLECTION:
        if align:
            if size <= 1:
                c = jnp.zeros_like(c)
            else:
                ts = r(jnp.float32(size - 1) * 2)
                a = jnp.abs(c)
                extra = r(a - r(jnp.trunc(r(a / ts)) * ts))
                c = jnp.minimum(extra, r(ts - extra))
        else:
            ts = r(jnp.float32(size) * 2)
            a = jnp.abs(r(c + 0.5))
            extra = r(a - r(jnp.trunc(r(a / ts)) * ts))
            c = r(jnp.minimum(extra, r(ts - extra)) - 0.5)
        return _clip_low(c, size)
    return c


def _sum_low(terms, r):
    """((t0 + t1) + t2) + ..., each product and each sum rounded."""
    out = None
    for t in terms:
        out = r(t) if out is None else r(out + r(t))
    return out


def _cubic_coeffs_low(t, r):
    a = -0.75

    def far(x):  # ((A x - 5A) x + 8A) x - 4A
        return r(r(r(r(r(r(a * x) - 5 * a) * x) + 8 * a) * x) - 4 * a)

    def near(x):  # ((A + 2) x - (A + 3)) x x + 1
        return r(r(r(r(r((a + 2) * x) - (a + 3)) * x) * x) + 1)
    return [far(r(t + 1)), near(t), near(r(1 - t)), far(r(2 - t))]


def _grid_sample_2d_low(inp, grid, mode, padding, align, r):
    h, w = inp.shape[2:]
    flat = inp.reshape(inp.shape[:2] + (-1,))
    gx, gy = grid[..., 0], grid[..., 1]
    if mode == _BICUBIC:
        x, y = _loc_vec(gx, w, padding, align, r, False), _loc_vec(gy, h, padding, align, r, False)
        ix, iy = jnp.floor(x), jnp.floor(y)
        cx, cy = _cubic_coeffs_low(r(x - ix), r), _cubic_coeffs_low(r(y - iy), r)

        def tap(xx, yy):
            px = jnp.trunc(_pad_vec(xx, w, padding, align, r)).astype(jnp.int64)
            py = jnp.trunc(_pad_vec(yy, h, padding, align, r)).astype(jnp.int64)
            return _gather(flat, (h, w), [py, px])
        rows = [_sum_low([cx[k][:, None] * tap(ix + (k - 1), iy + (i - 1)) for k in range(4)], r)
                for i in range(4)]
        return _sum_low([cy[i][:, None] * rows[i] for i in range(4)], r)
    x, y = _loc_vec(gx, w, padding, align, r), _loc_vec(gy, h, padding, align, r)
    if mode == _NEAREST:
        return _gather(flat, (h, w), [jnp.round(y).astype(jnp.int64), jnp.round(x).astype(jnp.int64)])
    xw, yn = jnp.floor(x), jnp.floor(y)
    fw, fn = r(x - xw), r(y - yn)
    fe, fs = r(1 - fw), r(1 - fn)
    ixw, iyn = xw.astype(jnp.int64), yn.astype(jnp.int64)
    corners = [(iyn, ixw, r(fs * fe)), (iyn, ixw + 1, r(fs * fw)),
               (iyn + 1, ixw, r(fn * fe)), (iyn + 1, ixw + 1, r(fn * fw))]
    return _sum_low([_gather(flat, (h, w), [py, px]) * wt[:, None] for py, px, wt in corners], r)


def _src_scalar(c, size, padding, align, r):
    """grid_sampler_compute_source_index in scalar c10::Half / BFloat16 arithmetic."""
    if align:
        c = r(r(r(c + 1) / 2) * (size - 1))
    else:
        c = r(r(r(r(c + 1) * size) - 1) / 2)
    if padding == _BORDER:
        return _clip_low(c, size)
    if padding == _REFLECTION:
        lo2, hi2 = (0, 2 * (size - 1)) if align else (-1, 2 * size - 1)
        if lo2 == hi2:
            c = jnp.zeros_like(c)
        else:
            mn, span = r(jnp.float32(lo2) / 2), r(jnp.float32(hi2 - lo2) / 2)
            a = jnp.abs(r(c - mn))
            extra = jnp.fmod(a, span)
            flips = jnp.floor(r(a / span))
            c = jnp.where(jnp.fmod(flips, 2) == 0, r(extra + mn), r(r(span - extra) + mn))
        return _clip_low(c, size)
    return c


def _grid_sample_3d_low(inp, grid, mode, padding, align, r):
    sp = inp.shape[2:]
    flat = inp.reshape(inp.shape[:2] + (-1,))
    # grid[..., 0] is x (W), 1 is y (H), 2 is z (D)
    cz, cy, cx = [_src_scalar(grid[..., 2 - k], sp[k], padding, align, r) for k in range(3)]
    if mode == _NEAREST:
        return _gather(flat, sp, [jnp.round(c).astype(jnp.int64) for c in (cz, cy, cx)])
    b = [jnp.floor(c) for c in (cz, cy, cx)]
    # distances to the far (index + 1) and near (index) corner of each axis, rounded
    far = [r((f + 1) - c) for f, c in zip(b, (cz, cy, cx))]
    near = [r(c - f) for f, c in zip(b, (cz, cy, cx))]
    ib = [f.astype(jnp.int64) for f in b]
    out = None
    for dz, dy, dx in itertools.product((0, 1), repeat=3):  # tnw, tne, tsw, tse, bnw, ... order
        wz = near[0] if dz else far[0]
        wy = near[1] if dy else far[1]
        wx = near[2] if dx else far[2]
        wt = r(r(wx * wy) * wz)
        term = r(_gather(flat, sp, [ib[0] + dz, ib[1] + dy, ib[2] + dx]) * wt[:, None])
        out = term if out is None else r(out + term)
    return out


@register(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)
def grid_sampler(inp, grid, interpolation_mode, padding_mode, align_corners):
    if inp.dtype in (jnp.bfloat16, jnp.float16):
        r = rounder(inp.dtype)
        low = _grid_sample_2d_low if inp.ndim == 4 else _grid_sample_3d_low
        out = low(inp.astype(jnp.float32), grid.astype(inp.dtype).astype(jnp.float32),
                  interpolation_mode, padding_mode, align_corners, r)
        return out.astype(inp.dtype)
    return _grid_sample(inp, grid, interpolation_mode, padding_mode, align_corners)


@register(aten.grid_sampler_2d_backward.default, aten.grid_sampler_3d_backward.default)
def grid_sampler_backward(g, inp, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    fwd = lambda a, b: _grid_sample(a, b, interpolation_mode, padding_mode, align_corners)  # noqa: E731
    _, pull = jax.vjp(fwd, inp, grid)
    gi, gg = pull(g.astype(inp.dtype))
    return (gi if output_mask[0] else None), gg

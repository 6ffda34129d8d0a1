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


@register(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)
def grid_sampler(inp, grid, interpolation_mode, padding_mode, align_corners):
    acc = jnp.float32 if inp.dtype in (jnp.bfloat16, jnp.float16) else inp.dtype
    return _grid_sample(inp.astype(acc), grid.astype(acc), interpolation_mode, padding_mode,
                        align_corners)


@register(aten.grid_sampler_2d_backward.default, aten.grid_sampler_3d_backward.default)
def grid_sampler_backward(g, inp, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    fwd = lambda a, b: _grid_sample(a, b, interpolation_mode, padding_mode, align_corners)  # noqa: E731
    _, pull = jax.vjp(fwd, inp, grid)
    gi, gg = pull(g.astype(inp.dtype))
    return (gi if output_mask[0] else None), gg

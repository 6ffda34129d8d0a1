"""Discrete Fourier transforms: the three aten primitives torch.fft decomposes into.

    _fft_c2c(x, dim, normalization, forward)   complex -> complex
    _fft_r2c(x, dim, normalization, onesided)  real -> complex (forward transform; the last of
                                               `dim` halved when onesided)
    _fft_c2r(x, dim, normalization, last_dim_size)  Hermitian complex -> real (backward transform)

Transforms are unnormalised (forward e^-i, backward e^+i) and then scaled by `normalization`:
0 none, 1 1/sqrt(n), 2 1/n, n the product of the signal sizes over `dim`. Multi-dim transforms are
done one axis at a time (XLA's FFT takes at most 3 trailing axes)."""
from __future__ import annotations

import math

import jax.numpy as jnp

from .registry import aten, register


def _scale(y, n, normalization):
    if normalization == 1:
        return y / jnp.asarray(math.sqrt(n), y.real.dtype)
    if normalization == 2:
        return y / jnp.asarray(float(n), y.real.dtype)
    return y


def _c2c(x, dims, forward):
    for d in dims:
        # jnp.fft.ifft divides by n; "forward" norm leaves the backward transform unscaled
        x = jnp.fft.fft(x, axis=d) if forward else jnp.fft.ifft(x, axis=d, norm="forward")
    return x


def _norm_dims(x, dim):
    return [d % x.ndim for d in dim]


@register(aten._fft_c2c.default)
def fft_c2c(x, dim, normalization, forward):
    dims = _norm_dims(x, dim)
    n = math.prod(x.shape[d] for d in dims)
    return _scale(_c2c(x, dims, forward), n, normalization)


@register(aten._fft_r2c.default)
def fft_r2c(x, dim, normalization, onesided):
    dims = _norm_dims(x, dim)
    n = math.prod(x.shape[d] for d in dims)
    if not dims:
        return x.astype(jnp.result_type(x.dtype, jnp.complex64))
    if onesided:
        y = _c2c(jnp.fft.rfft(x, axis=dims[-1]), dims[:-1], True)
    else:
        y = _c2c(x.astype(jnp.result_type(x.dtype, jnp.complex64)), dims, True)
    return _scale(y, n, normalization)


@register(aten._fft_c2r.default)
def fft_c2r(x, dim, normalization, last_dim_size):
    dims = _norm_dims(x, dim)
    y = _c2c(x, dims[:-1], False)
    y = jnp.fft.irfft(y, n=last_dim_size, axis=dims[-1], norm="forward")
    n = math.prod(y.shape[d] for d in dims)
    return _scale(y, n, normalization)

"""Randomized leaky ReLU: rrelu_with_noise, rrelu_with_noise_ (what F.rrelu / nn.RReLU call) and
rrelu_with_noise_backward.

Training: each element x <= 0 is multiplied by its own slope drawn uniformly from [lower, upper]
(the op's `_key`, so values differ from eager's CPU generator), and the `noise` argument is
overwritten with the slopes (1 where x > 0): the gradient is noise * grad. Evaluation: leaky ReLU
with slope (lower + upper) / 2, and noise is left alone.

The schema writes `noise` without returning it (`Tensor(b!) noise`), so the generic in-place
machinery has no functional form to record. The lowering is registered for
rrelu_with_noise_functional, which returns (output, new noise), and direct kernels for the
mutating overloads record it and copy the new noise (and, in place, the output) back, as
nn.py does for batch norm's running statistics.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from lazyxla.jaxenv import type_name
from .pointwise import compute
from .registry import aten, register


def _slope_dtype(dt):
    """eager draws in double and keeps the slope in the op math type: float, double for double."""
    return jnp.float64 if np.dtype(dt) == np.float64 else jnp.float32


@register(aten.rrelu_with_noise_functional.default, meta=True, random=True)
def rrelu_with_noise_functional(x, noise, lower=0.125, upper=1.0 / 3.0, training=False,
                                generator=None, _meta=None, _key=None):
    if not training:
        x_, slope = compute(_meta, x, (lower + upper) / 2)
        return jnp.where(x_ > 0, x_, x_ * slope), noise
    sd = _slope_dtype(x.dtype)
    r = jax.random.uniform(_key, x.shape, sd, jnp.asarray(lower, sd), jnp.asarray(upper, sd))
    neg = x <= 0
    xs = x.astype(sd)
    return jnp.where(neg, xs * r, xs), jnp.where(neg, r, jnp.ones((), sd))


@register(aten.rrelu_with_noise_backward.default, meta=True)
def rrelu_with_noise_backward(grad, x, noise, lower, upper, training, self_is_result, _meta=None):
    if training:
        g, n = compute(_meta, grad, noise)
        return n * g
    g, x_, slope = compute(_meta, grad, x, (lower + upper) / 2)
    return jnp.where(x_ > 0, g, g * slope)


_TRAIN_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def _check(x, noise, training):
    """rrelu_with_noise_out_cpu's checks (its meta kernels skip them)."""
    if x.shape != noise.shape:
        raise RuntimeError("noise tensor shape must match self tensor shape. Got self.shape = "
                           f"{list(x.shape)} noise.shape = {list(noise.shape)}")
    if training and x.dtype not in _TRAIN_DTYPES:
        raise NotImplementedError(f"\"rrelu_with_noise_out_cpu\" not implemented for '{type_name(x.dtype)}'")


def _run(x, noise, lower, upper, training, generator):
    _check(x, noise, training)
    out, new_noise = aten.rrelu_with_noise_functional(x, noise, lower, upper, training,
                                                      generator=generator)
    if training:
        with torch.no_grad():
            noise.copy_(new_noise)
    return out


def _rrelu_with_noise(x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    return _run(x, noise, lower, upper, training, generator)


def _rrelu_with_noise_inplace(x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    out = _run(x, noise, lower, upper, training, generator)
    with torch.no_grad():
        x.copy_(out)
    return x


def _rrelu_with_noise_out(x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None, *,
                          out):
    res = _run(x, noise, lower, upper, training, generator)
    with torch.no_grad():
        if out.shape != res.shape:
            out.resize_(res.shape)
        out.copy_(res)
    return out


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("rrelu_with_noise", _rrelu_with_noise, "PrivateUse1")
_LIB.impl("rrelu_with_noise_", _rrelu_with_noise_inplace, "PrivateUse1")
_LIB.impl("rrelu_with_noise.out", _rrelu_with_noise_out, "PrivateUse1")

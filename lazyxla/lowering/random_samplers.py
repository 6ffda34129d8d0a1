"""Samplers of the gamma family, which torch.distributions' Gamma, Beta, Dirichlet, Chi2, Poisson
and Binomial draw from: `_standard_gamma` (and the gradient of its sample, for rsample),
`_sample_dirichlet`, `poisson` and `binomial`. Values differ from CPU's generator (JAX draws them);
distributions, shapes, dtypes and eager's edge values match."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from lazyxla.ir.meta import META_KERNELS
from lazyxla.jaxenv import type_name
from .checks import _floating_only, _require, check, fail
from .random import _float_dtype
from .registry import POISSON_RATE, aten, check_values, register


def _floating_kernel(kernel):
    def fn(x, *args, **kwargs):
        _require(x.dtype, kernel, allowed=_floating_only)
    return fn


# Half and BFloat16 pass: eager's CPU kernels lack them for gamma and dirichlet, lazyxla computes
check(aten._standard_gamma.default)(_floating_kernel("gamma_cpu"))
check(aten._sample_dirichlet.default)(_floating_kernel("dirichlet"))
check(aten.poisson.default)(_floating_kernel("poisson_cpu"))


@check(aten._standard_gamma_grad.default)
def _standard_gamma_grad_check(alpha, sample):
    _require(alpha.dtype, "_standard_gamma_grad_cpu", allowed=_floating_only)
    if sample.dtype != alpha.dtype:
        fail(f"Found dtype {type_name(sample.dtype)} but expected {type_name(alpha.dtype)}")


@check(aten.binomial.default)
def _binomial_check(count, prob, generator=None):
    for name, t in (("count", count), ("prob", prob)):
        if not _floating_only(t.dtype):
            fail(f"binomial only supports floating-point dtypes for {name}, got: "
                 f"{type_name(t.dtype)}", ValueError)
    if prob.dtype != count.dtype:
        fail(f"Found dtype {type_name(prob.dtype)} but expected {type_name(count.dtype)}")


# PyTorch has no meta kernels for these three: eager's shapes and dtypes
META_KERNELS[aten._sample_dirichlet.default] = lambda alpha, generator=None: torch.empty_like(alpha)
META_KERNELS[aten.binomial.default] = lambda count, prob, generator=None: torch.empty(
    torch.broadcast_shapes(count.shape, prob.shape), dtype=count.dtype, device="meta")
META_KERNELS[aten._standard_gamma_grad.default] = lambda alpha, sample: torch.empty(
    torch.broadcast_shapes(alpha.shape, sample.shape), dtype=alpha.dtype, device="meta")


def _gamma(key, alpha):
    """Gamma(alpha, 1) in at least float32. Eager returns its dtype's smallest normal number where
    alpha is not positive (or NaN) and where a draw underflows, so a sample is never 0."""
    fd = _float_dtype(alpha.dtype)
    a = alpha.astype(fd)
    valid = a > 0
    g = jax.random.gamma(key, jnp.where(valid, a, 1), a.shape, fd)
    g = jnp.where(a == jnp.inf, jnp.inf, jnp.where(valid, g, 0))
    return jnp.maximum(g, jnp.finfo(alpha.dtype).tiny)


@register(aten._standard_gamma.default, random=True)
def standard_gamma(alpha, generator=None, _key=None):
    return _gamma(_key, alpha)


@register(aten._standard_gamma_grad.default)
def standard_gamma_grad(alpha, sample):
    """d sample / d alpha at a fixed uniform draw (the implicit reparameterization rsample uses)."""
    fd = _float_dtype(alpha.dtype)
    a, x = jnp.broadcast_arrays(alpha.astype(fd), sample.astype(fd))  # a lax op: no broadcasting
    return jax.lax.random_gamma_grad(a, x)


@register(aten._sample_dirichlet.default, random=True)
def sample_dirichlet(alpha, generator=None, _key=None):
    """Normalized gamma draws along the last dim, as eager's: each at least the smallest normal
    number."""
    g = _gamma(_key, alpha)
    total = jnp.sum(g, axis=-1, keepdims=True) if alpha.ndim else g
    return jnp.maximum(g / total, jnp.finfo(alpha.dtype).tiny)


@register(aten.poisson.default, random=True)
def poisson(rate, generator=None, _key=None):
    fd = _float_dtype(rate.dtype)
    lam = rate.astype(fd)
    check_values(~(lam >= 0), POISSON_RATE)
    return jax.random.poisson(_key, jnp.where(lam >= 0, lam, 0), lam.shape, jnp.int64).astype(fd)


@register(aten.binomial.default, random=True)
def binomial(count, prob, generator=None, _key=None):
    """Eager clamps a probability into [0, 1] and gives NaN for a NaN one. A negative or NaN count
    gives NaN here (eager's CPU kernel never returns for one)."""
    fd = _float_dtype(count.dtype)
    n, p = jnp.broadcast_arrays(count.astype(fd), prob.astype(fd))
    valid = n >= 0
    draw = jax.random.binomial(_key, jnp.where(valid, n, 0), jnp.clip(p, 0, 1), n.shape, fd)
    return jnp.where(valid & ~jnp.isnan(p), draw, jnp.nan)

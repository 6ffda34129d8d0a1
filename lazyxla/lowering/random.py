"""Random ops. Each recorded op gets its own PRNG key (`_key`, seeded from the device RNG), so every
call draws a fresh sample and torch.manual_seed makes runs reproducible. Values differ from CPU's
generator; distributions, shapes and dtypes match. In-place forms (uniform_, normal_, bernoulli_,
random_, exponential_, ...) go through these functional ops."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lazyxla.ir.meta import META_KERNELS
from lazyxla.jaxenv import np_dtype
from .registry import (BERNOULLI_P, MULTINOMIAL_P, MULTINOMIAL_SUM, NORMAL_STD, aten,
                       check_values, register)


def _out(_meta):
    (shape, dtype), = _meta[:1]
    return tuple(shape), np_dtype(dtype)


def _complex(dt) -> bool:
    return np.issubdtype(np.dtype(dt), np.complexfloating)


def _float_dtype(dt):
    """Sample in at least float32 (the result is cast to the output dtype); a complex dtype's
    parts in their own precision."""
    return jnp.float64 if np.dtype(dt) in (np.float64, np.complex128) else jnp.float32


def _parts(draw, shape, dt):
    """draw(shape) for a real dtype. For a complex one, independent real and imaginary parts:
    eager samples a complex tensor as its view_as_real."""
    if not _complex(dt):
        return draw(tuple(shape))
    parts = draw(tuple(shape) + (2,))
    return jax.lax.complex(parts[..., 0], parts[..., 1])


def _uniform(key, shape, dt, lo=0.0, hi=1.0):
    fd = _float_dtype(dt)
    return _parts(lambda s: jax.random.uniform(key, s, fd, jnp.asarray(lo, fd), jnp.asarray(hi, fd)),
                  shape, dt)


def _standard_normal(key, shape, dt):
    """N(0, 1); for a complex dtype each part N(0, 1/2), as eager's normal_ (its std / sqrt(2))."""
    fd = _float_dtype(dt)
    scale = np.sqrt(0.5) if _complex(dt) else 1.0
    return _parts(lambda s: jax.random.normal(key, s, fd) * jnp.asarray(scale, fd), shape, dt)


# ---------------------------------------------------------------- factories

@register(aten.rand.default, aten.rand.generator, aten.rand_like.default,
          meta=True, random=True)
def rand(*args, _meta, _key, **kwargs):
    shape, dt = _out(_meta)
    return _uniform(_key, shape, dt)


@register(aten.randn.default, aten.randn.generator, aten.randn_like.default,
          meta=True, random=True)
def randn(*args, _meta, _key, **kwargs):
    shape, dt = _out(_meta)
    return _standard_normal(_key, shape, dt)


def _randint(key, shape, low, high):
    return jax.random.randint(key, shape, jnp.asarray(low, jnp.int64), jnp.asarray(high, jnp.int64),
                              jnp.int64)


@register(aten.randint.default, aten.randint.generator, meta=True, random=True)
def randint(high, size, *args, _meta, _key, **kwargs):
    shape, _ = _out(_meta)
    return _randint(_key, shape, 0, high)


@register(aten.randint.low, aten.randint.low_generator, meta=True, random=True)
def randint_low(low, high, size, *args, _meta, _key, **kwargs):
    shape, _ = _out(_meta)
    return _randint(_key, shape, low, high)


@register(aten.randint_like.default, meta=True, random=True)
def randint_like(x, high, *args, _meta, _key, **kwargs):
    shape, _ = _out(_meta)
    return _randint(_key, shape, 0, high)


@register(aten.randint_like.low_dtype, meta=True, random=True)
def randint_like_low(x, low, high, *args, _meta, _key, **kwargs):
    shape, _ = _out(_meta)
    return _randint(_key, shape, low, high)


@register(aten.randperm.default, aten.randperm.generator, meta=True, random=True)
def randperm(n, *args, _meta, _key, **kwargs):
    return jax.random.permutation(_key, jnp.arange(n, dtype=jnp.int64))


# ---------------------------------------------------------------- functional forms of x.op_()

@register(aten.uniform.default, meta=True, random=True)
def uniform(x, *args, _meta=None, _key=None, **kwargs):
    # `from` is a Python keyword: it may arrive positionally or as kwargs["from"].
    lo = args[0] if len(args) > 0 else kwargs.get("from", 0.0)
    hi = args[1] if len(args) > 1 else kwargs.get("to", 1.0)
    return _uniform(_key, x.shape, x.dtype, lo, hi)


def _normal_inplace(x, mean=0.0, std=1.0, *, generator=None):
    """normal_ has no functional overload in this PyTorch: draw with normal.float_float, copy in."""
    import torch
    with torch.no_grad():
        x.copy_(aten.normal.float_float(mean, std, list(x.shape), dtype=x.dtype, device=x.device,
                                        generator=generator))
    return x


_LIB = __import__("torch").library.Library("aten", "IMPL")
_LIB.impl("normal_", _normal_inplace, "PrivateUse1")


@register(aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor, meta=True,
          random=True)
def normal_tensor(mean, std=1.0, generator=None, _meta=None, _key=None):  # (std=1 is dropped)
    shape, dt = _out(_meta)
    fd = _float_dtype(dt)
    if hasattr(std, "dtype"):  # a tensor (a float std was checked before recording)
        check_values(~(std >= 0), NORMAL_STD)  # NaN fails too, as in eager's check
    # a complex mean is added whole (eager: normal_(0, std), then add_(mean))
    return (_standard_normal(_key, shape, dt) * jnp.asarray(std, fd)
            + (mean if _complex(dt) else jnp.asarray(mean, fd)))


def _normal_meta(op):
    def meta(mean, std=1.0, generator=None):
        import torch
        if mean.is_complex():  # PyTorch's meta kernel compares the std with the mean's dtype
            shape = torch.broadcast_shapes(mean.shape, getattr(std, "shape", ()))
            return torch.empty(shape, dtype=mean.dtype, device="meta")
        return op(mean, std, generator=generator)
    return meta


for _op in (aten.normal.Tensor_float, aten.normal.Tensor_Tensor):
    META_KERNELS[_op] = _normal_meta(_op)


@register(aten.normal.float_float, meta=True, random=True)
def normal_float_float(mean, std, size, *args, _meta, _key, **kwargs):
    shape, dt = _out(_meta)
    # a complex tensor's parts are each N(mean, std^2 / 2): eager draws its view_as_real
    return _standard_normal(_key, shape, dt) * std + (mean * (1 + 1j) if _complex(dt) else mean)


def _random_bounds(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return 0, 2
    if np.issubdtype(dt, np.integer):
        return 0, int(min(np.iinfo(dt).max, 2 ** 63 - 1)) + (1 if np.iinfo(dt).max < 2 ** 63 - 1 else 0)
    # floating: [0, 2^mantissa] (jnp.finfo: numpy's does not know bfloat16)
    return 0, 2 ** (jnp.finfo(dt).nmant + 1) + 1


@register(aten.random.default, meta=True, random=True)
def random_default(x, generator=None, _meta=None, _key=None):
    lo, hi = _random_bounds(x.dtype)
    return _randint(_key, x.shape, lo, hi)


@register(aten.random.to, meta=True, random=True)
def random_to(x, to, generator=None, _meta=None, _key=None):
    return _randint(_key, x.shape, 0, to)


@register(getattr(aten.random, "from"), meta=True, random=True)
def random_from(x, from_, to=None, generator=None, _meta=None, _key=None):
    hi = to if to is not None else _random_bounds(x.dtype)[1]
    return _randint(_key, x.shape, from_, hi)


@register("lazyxla::bernoulli.p", meta=True, random=True)  # kernels: device/private_kernels.py
def bernoulli_p(x, p=0.5, generator=None, _meta=None, _key=None):
    return _uniform(_key, x.shape, jnp.float32) < p


def _check_probability(p):
    if jnp.issubdtype(p.dtype, jnp.floating):  # NaN fails too, as in eager's check
        check_values(~((p >= 0) & (p <= 1)), BERNOULLI_P)


@register(aten.bernoulli.default, meta=True, random=True)
def bernoulli(x, generator=None, _meta=None, _key=None):
    _check_probability(x)
    return _uniform(_key, x.shape, x.dtype) < x


@register(aten.bernoulli.Tensor, meta=True, random=True)
def bernoulli_tensor(x, p, generator=None, _meta=None, _key=None):
    _check_probability(p)
    return jnp.broadcast_to(_uniform(_key, x.shape, p.dtype) < p, x.shape)


@register(aten.exponential.default, meta=True, random=True)
def exponential(x, lambd=1.0, generator=None, _meta=None, _key=None):
    fd = _float_dtype(x.dtype)
    return jax.random.exponential(_key, x.shape, fd) / jnp.asarray(lambd, fd)


@register(aten.geometric.default, meta=True, random=True)
def geometric(x, p, generator=None, _meta=None, _key=None):
    u = _uniform(_key, x.shape, jnp.float64)
    return jnp.ceil(jnp.log1p(-u) / jnp.log1p(-jnp.asarray(p, jnp.float64)))


@register(aten.log_normal.default, meta=True, random=True)
def log_normal(x, mean=1.0, std=2.0, generator=None, _meta=None, _key=None):
    fd = _float_dtype(x.dtype)
    return jnp.exp(jax.random.normal(_key, x.shape, fd) * jnp.asarray(std, fd) + jnp.asarray(mean, fd))


@register(aten.cauchy.default, meta=True, random=True)
def cauchy(x, median=0.0, sigma=1.0, generator=None, _meta=None, _key=None):
    fd = _float_dtype(x.dtype)
    return jax.random.cauchy(_key, x.shape, fd) * jnp.asarray(sigma, fd) + jnp.asarray(median, fd)


@register(aten.multinomial.default, meta=True, random=True)
def multinomial(probs, num_samples, replacement=False, generator=None, _meta=None, _key=None):
    p = probs.astype(jnp.float64) if probs.dtype == jnp.float64 else probs.astype(jnp.float32)
    p2 = p.reshape(-1, p.shape[-1])
    check_values(~(jnp.isfinite(p2) & (p2 >= 0)), MULTINOMIAL_P)
    check_values(jnp.sum(p2, axis=-1) <= 0, MULTINOMIAL_SUM)
    logp = jnp.log(p2)  # zero probability -> -inf, never drawn
    if replacement:
        out = jax.random.categorical(_key, logp[:, None, :], axis=-1, shape=(p2.shape[0], num_samples))
    else:
        # Gumbel top-k: sampling without replacement proportionally to p
        gumbel = jax.random.gumbel(_key, logp.shape, logp.dtype)
        _, out = jax.lax.top_k(logp + gumbel, num_samples)
    return out.astype(jnp.int64).reshape(probs.shape[:-1] + (num_samples,))


# ---------------------------------------------------------------- dropout

@register(aten.native_dropout.default, meta=True, random=True)
def native_dropout(x, p, train, _meta=None, _key=None):
    if train is False:
        return x, jnp.ones(x.shape, jnp.bool_)
    if p >= 1.0:
        return jnp.zeros_like(x), jnp.zeros(x.shape, jnp.bool_)
    keep = _uniform(_key, x.shape, jnp.float32) >= p  # P(keep) = 1 - p
    scale = 1.0 / (1.0 - p)
    return jnp.where(keep, x * jnp.asarray(scale, x.dtype), jnp.zeros((), x.dtype)), keep


def _native_dropout_meta(x, p, train):
    import torch
    if x.is_complex():  # PyTorch's meta kernel takes floating types only; eager's CPU kernel any
        return torch.empty_like(x), torch.empty_like(x, dtype=torch.bool)
    return aten.native_dropout.default(x, p, train)


META_KERNELS[aten.native_dropout.default] = _native_dropout_meta


@register(aten.native_dropout_backward.default)
def native_dropout_backward(g, mask, scale):
    return g * mask.astype(g.dtype) * scale

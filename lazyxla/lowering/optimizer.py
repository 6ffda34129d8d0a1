"""Optimizer ops: the `_foreach_*` family (one IR node per list op, not one per tensor) and the
fused Adam/AdamW kernels (one node per optimizer step; fused SGD runs through the CPU fallback).

A `_foreach_<op>` applies `<op>` to each element of its list arguments; its in-place form
(`_foreach_add_`) writes each result back through the registry's in-place handling. `Scalar` and
`Scalar[]` arguments (learning rates, bias corrections) are runtime values, so an optimizer whose
lr changes every step compiles nothing new. The pointwise math is written here with jnp.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
from jax import lax

from .registry import aten, register


def _is_one(a):
    return isinstance(a, (int, float)) and a == 1


def _lerp(x, end, w):
    # PyTorch: weight < 0.5 ? self + weight * (end - self) : end - (end - self) * (1 - weight)
    d = end - x
    return jnp.where(jnp.abs(w) < 0.5, x + w * d, end - d * (1 - w))


_UNARY = {
    "abs": jnp.abs, "acos": jnp.arccos, "asin": jnp.arcsin, "atan": jnp.arctan, "ceil": jnp.ceil,
    "cos": jnp.cos, "cosh": jnp.cosh, "erf": jsp.erf, "erfc": jsp.erfc, "exp": jnp.exp,
    "expm1": jnp.expm1, "floor": jnp.floor, "frac": lambda x: x - jnp.trunc(x),
    "lgamma": lambda x: lax.lgamma(x.astype(jnp.result_type(x.dtype, jnp.float32))),
    "log": jnp.log, "log10": jnp.log10, "log1p": jnp.log1p, "log2": jnp.log2, "neg": jnp.negative,
    "reciprocal": lambda x: 1 / x, "round": jnp.round, "rsqrt": lambda x: lax.rsqrt(
        x.astype(jnp.result_type(x.dtype, jnp.float32))),
    "sigmoid": jax.nn.sigmoid, "sign": jnp.sign, "sin": jnp.sin, "sinh": jnp.sinh, "sqrt": jnp.sqrt,
    "tan": jnp.tan, "tanh": jnp.tanh, "trunc": jnp.trunc, "zero": jnp.zeros_like,
}

_BINARY = {
    "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": jnp.true_divide,
    "maximum": jnp.maximum, "minimum": jnp.minimum, "clamp_min": jnp.maximum,
    "clamp_max": jnp.minimum, "pow": jnp.power,
}


def _ops(name, *overloads):
    packet = getattr(aten, f"_foreach_{name}", None)
    if packet is None:
        return []
    return [getattr(packet, o) for o in overloads if o in packet.overloads()]


def _unary(fn):
    return lambda xs: [fn(x) for x in xs]


def _binary(fn):
    def low(xs, other, alpha=1):
        others = other if isinstance(other, (list, tuple)) else [other] * len(xs)
        if not _is_one(alpha):
            others = [o * alpha for o in others]
        return [fn(x, o) for x, o in zip(xs, others)]
    return low


for _name, _fn in _UNARY.items():
    register(*_ops(_name, "default"))(_unary(_fn))

for _name, _fn in _BINARY.items():
    register(*_ops(_name, "List", "Scalar", "ScalarList", "Tensor"))(_binary(_fn))


@register(*_ops("pow", "ScalarAndTensor"))
def _foreach_pow_scalar_tensor(s, xs):
    return [jnp.power(s, x) for x in xs]


def _addc(op):
    def low(xs, t1s, t2s, value=1):
        values = value if isinstance(value, (list, tuple)) else [value] * len(xs)
        # PyTorch: self + value * t1 (op) t2, evaluated left to right; the value converted to an
        # integer tensor's dtype first (1.5 -> 1), as the plain op's CPU kernel does
        return [x + op(_like(v, x) * a, b) for x, a, b, v in zip(xs, t1s, t2s, values)]
    return low


def _like(v, x):
    return v if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.asarray(v).astype(x.dtype)


# The Tensor overloads take a CPU 1-d tensor of scalars, which cannot enter a device program:
# those keep PyTorch's per-tensor kernel.
register(*_ops("addcmul", "Scalar", "ScalarList"))(_addc(jnp.multiply))
register(*_ops("addcdiv", "Scalar", "ScalarList"))(_addc(jnp.true_divide))


@register(*_ops("lerp", "List", "Scalar", "ScalarList"))
def _foreach_lerp(xs, ends, weight):
    ws = weight if isinstance(weight, (list, tuple)) else [weight] * len(xs)
    return [_lerp(x, e, w) for x, e, w in zip(xs, ends, ws)]


@register(*_ops("copy", "default"))
def _foreach_copy(xs, srcs, non_blocking=False):
    return [jnp.broadcast_to(s, x.shape) for x, s in zip(xs, srcs)]


@register(*_ops("max", "default"))
def _foreach_max(xs):
    return [jnp.max(x) for x in xs]


def _norm(x, p):
    """Vector norm for a runtime order p (a traced scalar): every case, selected by p."""
    a = jnp.abs(x).astype(jnp.result_type(x.dtype, jnp.float32))
    if a.size == 0:
        return jnp.zeros((), a.dtype)
    two = jnp.sqrt(jnp.sum(a * a))
    one = jnp.sum(a)
    inf = jnp.max(a)
    ninf = jnp.min(a)
    zero = jnp.sum(a != 0).astype(a.dtype)
    safe_p = jnp.where((p == 0) | jnp.isinf(p), 1.0, p).astype(a.dtype)
    gen = jnp.sum(a ** safe_p) ** (1 / safe_p)
    return jnp.select([p == 2, p == 1, jnp.isposinf(p), jnp.isneginf(p), p == 0],
                      [two, one, inf, ninf, zero], gen)


@register(*_ops("norm", "Scalar"))
def _foreach_norm(xs, ord=2, dtype=None):
    p = jnp.asarray(ord)
    return [_norm(x, p) for x in xs]  # the registry casts to `dtype`


# Fused Adam/AdamW (torch.optim's fused=True): one node for the whole update of every parameter.
# The functional form returns five lists (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs);
# meta flattens them into one tuple of outputs, which the in-place kernel writes back in order.
# The hyperparameters are runtime values, so an lr schedule compiles nothing new. The step counts
# live on the device (fused keeps them with the parameters) and the optimizer advances them before
# the call. As PyTorch's CPU kernel: bias corrections in float64, the update in the parameter's
# math type; with grad_scale the grads are unscaled (and written back), and found_inf == 1 skips
# the whole update.
_HYPER = ("lr", "beta1", "beta2", "weight_decay", "eps")


def _fused_adam_math(decoupled):
    def low(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
            beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        outs = ([], [], [], [], [])
        for i, (p, g, m, v, step) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs, state_steps)):
            ct = jnp.promote_types(p.dtype, jnp.float32)  # opmath: float32 for half types
            p32, g32, m32, v32 = (x.astype(ct) for x in (p, g, m, v))
            if grad_scale is not None:
                g32 = g32 / grad_scale.astype(ct)
            g_out = g32.astype(g.dtype)
            d = -g32 if maximize else g32
            if decoupled:
                p32 = p32 * (1 - (lr * weight_decay))
            else:
                d = d + p32 * weight_decay
            m32 = m32 + (d - m32) * (1 - beta1)
            v32 = v32 * beta2 + d * d * (1 - beta2)
            t = step.astype(jnp.float64)
            bc1 = 1 - jnp.power(jnp.asarray(beta1, jnp.float64), t)
            bc2_sqrt = jnp.sqrt(1 - jnp.power(jnp.asarray(beta2, jnp.float64), t))
            step_size = (lr / bc1).astype(ct)
            if amsgrad:
                mx = jnp.maximum(max_exp_avg_sqs[i].astype(ct), v32)
                denom = jnp.sqrt(mx) / bc2_sqrt.astype(ct) + eps
            else:
                denom = jnp.sqrt(v32) / bc2_sqrt.astype(ct) + eps
            p32 = p32 - step_size * m32 / denom
            new = [p32.astype(p.dtype), g_out, m32.astype(m.dtype), v32.astype(v.dtype)]
            old = [p, g, m, v]
            if amsgrad:
                new.append(mx.astype(max_exp_avg_sqs[i].dtype))
                old.append(max_exp_avg_sqs[i])
            if found_inf is not None:
                skip = found_inf.astype(bool)
                new = [jnp.where(skip, o, n) for o, n in zip(old, new)]
            for k, x in enumerate(new):
                outs[k].append(x)
        if not amsgrad:  # the functional form still returns copies of the (unused) max list
            outs[4].extend(max_exp_avg_sqs)
        return tuple(x for group in outs for x in group)
    return low


register(aten._fused_adamw.default, runtime=_HYPER)(_fused_adam_math(decoupled=True))
register(aten._fused_adam.default, runtime=_HYPER)(_fused_adam_math(decoupled=False))


# GradScaler (torch.amp): unscale the grads, flagging a non-finite value in any of them; then grow
# or back off the scale. As PyTorch's kernels: grads are unscaled in their math type, found_inf
# becomes 1 and is never reset here, and a grown scale that would be inf is not taken.
@register(aten._amp_foreach_non_finite_check_and_unscale.default)
def amp_unscale(grads, found_inf, inv_scale):
    outs, bad = [], jnp.zeros((), bool)
    for g in grads:
        bad = bad | ~jnp.all(jnp.isfinite(g))
        ct = jnp.promote_types(g.dtype, jnp.float32)
        outs.append((g.astype(ct) * inv_scale.astype(ct).reshape(())).astype(g.dtype))
    return tuple(outs) + (jnp.where(bad, jnp.ones_like(found_inf), found_inf),)


@register(aten._amp_update_scale.default)
def amp_update_scale(scale, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor,
                     growth_interval):
    inf = found_inf != 0
    successful = growth_tracker + 1
    grow = ~inf & (successful == growth_interval)
    grown = scale * scale_growth_factor
    new_scale = jnp.where(inf, scale * scale_backoff_factor,
                          jnp.where(grow & jnp.isfinite(grown), grown, scale))
    tracker = jnp.where(inf | grow, jnp.zeros_like(growth_tracker), successful)
    return new_scale.astype(scale.dtype), tracker.astype(growth_tracker.dtype)

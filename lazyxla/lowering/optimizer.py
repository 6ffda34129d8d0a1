"""Optimizer ops: the `_foreach_*` family (one IR node per list op, not one per tensor) and the
fused Adam/AdamW, SGD and Adagrad kernels (one node per optimizer step).

A `_foreach_<op>` applies `<op>` to each element of its list arguments, by `<op>`'s own lowering;
its in-place form (`_foreach_add_`) writes each result back through the registry's in-place
handling. `Scalar` and `Scalar[]` arguments (learning rates, bias corrections) are runtime values,
so an optimizer whose lr changes every step compiles nothing new.
"""
from __future__ import annotations

import jax.numpy as jnp
import torch

from .registry import LOWERINGS, aten, overload_named, register


def _ops(name, *overloads):
    packet = getattr(aten, f"_foreach_{name}", None)
    if packet is None:
        return []
    return [getattr(packet, o) for o in overloads if o in packet.overloads()]


_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
          "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round",
          "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "zero")

# _foreach overload -> the plain op eager's CPU kernel applies to each element (its slow path: a
# _foreach op on the CPU is the plain op per tensor, with the plain op's dtypes, promotion and
# integer semantics; a maximum with a scalar is clamp_min), and where its lists sit
_PER_TENSOR = {
    **{f"{n}.default": (f"{n}.default", (0,)) for n in _UNARY},
    **{f"{n}.{o}": (f"{n}.{p}", (0, 1) if o == "List" else (0,))
       for n in ("add", "sub", "mul", "div")
       for o, p in (("List", "Tensor"), ("Scalar", "Scalar"), ("ScalarList", "Scalar"),
                    ("Tensor", "Tensor"))},
    **{f"{n}.{o}": (p, (0, 1) if o == "List" else (0,))
       for n, lst, sc in (("maximum", "maximum.default", "clamp_min.default"),
                          ("minimum", "minimum.default", "clamp_max.default"),
                          ("clamp_min", "clamp_min.Tensor", "clamp_min.default"),
                          ("clamp_max", "clamp_max.Tensor", "clamp_max.default"),
                          ("pow", "pow.Tensor_Tensor", "pow.Tensor_Scalar"))
       for o, p in (("List", lst), ("Scalar", sc), ("ScalarList", sc))},
    "pow.ScalarAndTensor": ("pow.Scalar", (1,)),
    **{f"{n}.{o}": (f"{n}.default", (0, 1, 2)) for n in ("addcmul", "addcdiv")
       for o in ("Scalar", "ScalarList")},
    "lerp.List": ("lerp.Tensor", (0, 1, 2)), "lerp.Scalar": ("lerp.Scalar", (0, 1)),
    "lerp.ScalarList": ("lerp.Scalar", (0, 1)),
    "max.default": ("max.default", (0,)),
}


def _per_tensor(plain, lists):
    """The _foreach lowering: `plain`'s lowering on each element of the lists (positions `lists`);
    a Scalar[] gives each element its own scalar, other arguments are shared."""
    def low(*args, _meta=None, **kwargs):
        fn = LOWERINGS[plain]  # (looked up when traced: every module has registered by then)
        out = []
        for i in range(len(args[lists[0]])):
            each = [a[i] if j in lists or isinstance(a, (list, tuple)) else a
                    for j, a in enumerate(args)]
            out.append(fn.fn(*each, **kwargs, **({"_meta": [_meta[i]]} if fn.meta else {})))
        return out
    return low


for _name, (_plain, _lists) in _PER_TENSOR.items():
    _op = overload_named("_foreach_" + _name)
    if _op is not None:
        register(_op, meta=True)(_per_tensor(overload_named(_plain), _lists))


@register(*_ops("copy", "default"))
def _foreach_copy(xs, srcs, non_blocking=False):
    return [jnp.broadcast_to(s, x.shape) for x, s in zip(xs, srcs)]


@register(*_ops("norm", "Scalar"), meta=True)
def _foreach_norm(xs, ord=2, dtype=None, _meta=None):
    fn = LOWERINGS[aten.linalg_vector_norm.default]
    return [fn.fn(x, ord, None, False, dtype, _meta=[m]) for x, m in zip(xs, _meta)]


# Fused Adam/AdamW (torch.optim's fused=True): one node for the whole update of every parameter.
# The functional form returns five lists (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs);
# meta flattens them into one tuple of outputs, which the in-place kernel writes back in order.
# The hyperparameters are runtime values, so an lr schedule compiles nothing new. The step counts
# live on the device (fused keeps them with the parameters) and the optimizer advances them before
# the call. As PyTorch's CPU kernel: bias corrections in float64, the update in the parameter's
# math type; with grad_scale the grads are unscaled (and written back), and found_inf == 1 skips
# the whole update.
_HYPER = ("lr", "beta1", "beta2", "weight_decay", "eps")


def _unscaled(g, ct, grad_scale):
    """A grad in its math type, divided by GradScaler's scale where given."""
    g32 = g.astype(ct)
    return g32 if grad_scale is None else g32 / grad_scale.astype(ct).reshape(())


def _skipping(found_inf, old, new):
    """found_inf == 1 (GradScaler saw an inf or NaN): the kernel returns before writing anything."""
    if found_inf is None:
        return new
    skip = found_inf.astype(bool).reshape(())
    return [jnp.where(skip, o, n) for o, n in zip(old, new)]


def _fused_adam_math(decoupled):
    def low(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
            beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        outs = ([], [], [], [], [])
        for i, (p, g, m, v, step) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs, state_steps)):
            ct = jnp.promote_types(p.dtype, jnp.float32)  # opmath: float32 for half types
            p32, m32, v32 = (x.astype(ct) for x in (p, m, v))
            g32 = _unscaled(g, ct, grad_scale)
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
            for k, x in enumerate(_skipping(found_inf, old, new)):
                outs[k].append(x)
        if not amsgrad:  # the functional form still returns copies of the (unused) max list
            outs[4].extend(max_exp_avg_sqs)
        return tuple(x for group in outs for x in group)
    return low


def _unscaled_grads(kwargs) -> set:
    """The grads come back as they were unless a GradScaler's scale divides them."""
    return {"grads"} if kwargs.get("grad_scale") is None else set()


def _adam_unchanged(kwargs):
    return _unscaled_grads(kwargs) | (set() if kwargs.get("amsgrad") else {"max_exp_avg_sqs"})


register(aten._fused_adamw.default, aten._fused_adamw.tensor_lr,
         runtime=_HYPER, unchanged=_adam_unchanged)(_fused_adam_math(decoupled=True))
register(aten._fused_adam.default, aten._fused_adam.tensor_lr,
         runtime=_HYPER, unchanged=_adam_unchanged)(_fused_adam_math(decoupled=False))


# Fused SGD (torch.optim.SGD(fused=True)), as PyTorch's CPU kernel: in the parameter's math type,
# weight decay added to the grad, the momentum buffer taken from the grad on the first step, the
# parameter moved by -lr * the update; the grads written back only where unscaled.
@register(aten._fused_sgd.default, aten._fused_sgd.tensor_lr,
          runtime=("weight_decay", "momentum", "lr", "dampening"), unchanged=_unscaled_grads)
def _fused_sgd(params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening,
               nesterov, maximize, is_first_step, grad_scale=None, found_inf=None):
    outs = ([], [], [])
    with_momentum = bool(momentum_buffer_list)
    for i, (p, g) in enumerate(zip(params, grads)):
        ct = jnp.promote_types(p.dtype, jnp.float32)
        g32, p32 = _unscaled(g, ct, grad_scale), p.astype(ct)
        d = -g32 if maximize else g32
        d = d + p32 * jnp.asarray(weight_decay).astype(ct)
        old, new = [p, g], [None, g32.astype(g.dtype)]
        if with_momentum:
            buf = momentum_buffer_list[i]
            mom = jnp.asarray(momentum).astype(ct)
            b32 = d if is_first_step else (
                buf.astype(ct) * mom + d * (1 - jnp.asarray(dampening).astype(ct)))
            d = d + b32 * mom if nesterov else b32
            old.append(buf)
            new.append(b32.astype(buf.dtype))
        new[0] = (p32 - d * jnp.asarray(lr).astype(ct).reshape(())).astype(p.dtype)
        for k, x in enumerate(_skipping(found_inf, old, new)):
            outs[k].append(x)
    return tuple(x for group in outs for x in group)


# Fused Adagrad (torch.optim.Adagrad(fused=True)), as PyTorch's CPU kernel: the step's learning
# rate lr / (1 + (step - 1) * lr_decay) in float64, the state sum and the update in the math type.
# (The tensor-lr form returns no step counts: its schema does not write them.)
def _fused_adagrad_math(returns_steps):
    def low(params, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps, maximize,
            grad_scale=None, found_inf=None):
        outs = ([], [], [], [])
        for p, g, ssum, step in zip(params, grads, state_sums, state_steps):
            ct = jnp.promote_types(p.dtype, jnp.float32)
            g32, p32 = _unscaled(g, ct, grad_scale), p.astype(ct)
            d = -g32 if maximize else g32
            d = d + p32 * jnp.asarray(weight_decay).astype(ct)
            s32 = ssum.astype(ct) + d * d
            t = step.astype(jnp.float32).astype(jnp.float64).reshape(())
            clr = (jnp.asarray(lr, jnp.float64).reshape(()) / (1.0 + (t - 1.0) * lr_decay)).astype(ct)
            p32 = p32 - clr * d / (jnp.sqrt(s32) + jnp.asarray(eps).astype(ct))
            new = [p32.astype(p.dtype), g32.astype(g.dtype), s32.astype(ssum.dtype), step]
            for k, x in enumerate(_skipping(found_inf, [p, g, ssum, step], new)):
                outs[k].append(x)
        return tuple(x for group in outs[:4 if returns_steps else 3] for x in group)
    return low


_ADAGRAD_HYPER = ("lr", "lr_decay", "weight_decay", "eps")


def _adagrad_unchanged(kwargs):
    """The default form declares the step counts written too; the optimizer advances them before
    the call, and the kernel hands them back as they were."""
    return _unscaled_grads(kwargs) | {"state_steps"}


register(aten._fused_adagrad.default, runtime=_ADAGRAD_HYPER,
         unchanged=_adagrad_unchanged)(_fused_adagrad_math(True))
register(aten._fused_adagrad.tensor_lr, runtime=_ADAGRAD_HYPER,
         unchanged=_unscaled_grads)(_fused_adagrad_math(False))


def _like_lists(*lists):
    return tuple([torch.empty_like(t) for t in ts] for ts in lists)


def _fused_sgd_meta(params, grads, momentum_buffer_list, **kwargs):
    return _like_lists(params, grads, momentum_buffer_list)


def _fused_adagrad_meta(params, grads, state_sums, state_steps, **kwargs):
    return _like_lists(params, grads, state_sums, state_steps)


def _fused_adagrad_tensor_lr_meta(params, grads, state_sums, state_steps, **kwargs):
    return _like_lists(params, grads, state_sums)


def _fused_adam_meta(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, **kwargs):
    return _like_lists(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)


def _updates_in_place(*args, **kwargs):
    return None


# PyTorch lacks meta kernels for fused SGD and Adagrad, and for the tensor-lr forms of fused
# Adam/AdamW's in-place kernels (it has their CPU and CUDA kernels); lazyxla infers shapes with
# meta kernels, so it gives those that are missing its own.
_META = torch.library.Library("aten", "IMPL")
for _name, _fn, _tensor_lr_fn in (
        ("_fused_sgd", _fused_sgd_meta, _fused_sgd_meta),
        ("_fused_adagrad", _fused_adagrad_meta, _fused_adagrad_tensor_lr_meta),
        ("_fused_adam", _fused_adam_meta, _fused_adam_meta),
        ("_fused_adamw", _fused_adam_meta, _fused_adam_meta)):
    for _overload, _functional in (("", _fn), (".tensor_lr", _tensor_lr_fn)):
        for _op, _kernel in ((_name + _overload, _functional),
                             (_name + "_" + _overload, _updates_in_place)):
            if not torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + _op, "Meta"):
                _META.impl(_op, _kernel, "Meta")


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

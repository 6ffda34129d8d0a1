"""GraphSpec -> JAX function -> XLA executable."""
from __future__ import annotations

import jax

from lazyxla import metrics
from lazyxla.jaxenv import np_dtype, x64
from lazyxla.ir.node import Slot
from lazyxla.lowering.registry import weak_scalar


class LoweringError(RuntimeError):
    pass


def _fill(template, env):
    t = type(template)
    if t is Slot:
        return env[template.index]
    if t is tuple:
        return tuple(_fill(x, env) for x in template)
    return template


def _cast(value, shape, dtype, low):
    want = np_dtype(dtype)
    if tuple(value.shape) != tuple(shape):
        raise LoweringError(f"lowering of {low.name} produced shape {tuple(value.shape)}, "
                            f"PyTorch expects {tuple(shape)}")
    return value if value.dtype == want else value.astype(want)


def _apply(entry, env_in):
    low, ins, attrs, shape, dtype = entry
    args_t, kwargs_t = attrs
    args = _fill(args_t, env_in)
    kwargs = {k: _fill(v, env_in) for k, v in kwargs_t}
    if low.meta:
        kwargs["_meta"] = list(dtype) if shape is None else [(shape, dtype)]
    if low.random:
        kwargs["_key"] = jax.random.PRNGKey(kwargs["_key"])
    out = low.fn(*args, **kwargs)
    if shape is None:  # multi-output: dtype holds ((shape, dtype), ...)
        return tuple(None if sd is None else _cast(o, sd[0], sd[1], low) for o, sd in zip(out, dtype))
    return _cast(out, shape, dtype, low)


def build_function(spec):
    """The program as a Python function of its parameters (traced once by jax.jit)."""
    entries, n_params, outputs, scalars = spec.entries, spec.n_params, spec.outputs, spec.scalar_params

    def program(*params):
        values = [weak_scalar(p) if i in scalars else p for i, p in enumerate(params)]
        for e in entries[n_params:]:
            env = [values[j] for j in e[1]]
            values.append(_apply(e, env))
        return tuple(values[j] for j in outputs)

    return program


def param_avals(spec):
    return [jax.ShapeDtypeStruct(e[1], np_dtype(e[2])) for e in spec.entries[: spec.n_params]]


def compile_spec(spec):
    """Lower and compile; returns a jax Compiled. Counts CompileTime."""
    with metrics.timed("CompileTime"), x64(True):
        fn = build_function(spec)
        return jax.jit(fn).lower(*param_avals(spec)).compile()

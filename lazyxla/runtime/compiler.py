"""GraphSpec -> JAX function -> XLA executable."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from lazyxla import metrics
from lazyxla.jaxenv import check_not_forked, np_dtype, x64
from lazyxla.ir.node import Slot
from lazyxla.lowering import registry
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
        if _elementless(shape):  # eager's empty result of a degenerate case (a convolution of
            return jnp.zeros(shape, want)  # no input channels has the input's shape)
        raise LoweringError(f"lowering of {low.name} produced shape {tuple(value.shape)}, "
                            f"PyTorch expects {tuple(shape)}")
    if value.dtype == want:
        return value
    if want == _E4M3FN and jnp.issubdtype(value.dtype, jnp.floating):
        value = jnp.clip(value, -448, 448)  # PyTorch saturates (inf too); XLA would give NaN
    return registry.astype(value, want)


_E4M3FN = np_dtype(torch.float8_e4m3fn)


def _apply(entry, env_in):
    low, ins, attrs, shape, dtype = entry
    args_t, kwargs_t = attrs
    args = _fill(args_t, env_in)
    kwargs = {k: _fill(v, env_in) for k, v in kwargs_t}
    if low.meta:
        kwargs["_meta"] = list(dtype) if shape is None else [(shape, dtype)]
    if low.random:
        kwargs["_key"] = jax.random.PRNGKey(kwargs["_key"])
    specs = dtype if shape is None else ((shape, dtype),)  # multi-output: dtype holds the specs
    try:
        out = low.fn(*args, **kwargs)
    except Exception as e:
        if all(sd is None or _elementless(sd[0]) for sd in specs):
            # no element to compute: a lowering that trips on a zero-size reduction (a max over
            # nothing) need not run; its index checks, if any, are traced already
            return _empty(shape, dtype)
        what = "several outputs" if shape is None else f"output {tuple(shape)} {dtype}"
        e.add_note(f"lazyxla: in the lowering of {low.name} ({what})")  # (sync is far from the call)
        raise
    if shape is None:
        return tuple(None if sd is None else _cast(o, sd[0], sd[1], low) for o, sd in zip(out, dtype))
    return _cast(out, shape, dtype, low)


def _elementless(shape) -> bool:
    return 0 in shape


def _empty(shape, dtype):
    if shape is None:
        return tuple(None if sd is None else _empty(*sd) for sd in dtype)
    return jnp.zeros(shape, np_dtype(dtype))


class Program:
    """A compiled program and how to feed it. Runtime scalars travel packed, one vector per dtype:
    each scalar passed on its own costs the call ~2 us (a host-to-device transfer each), and an
    optimizer step has dozens. `feed(values)` turns values in parameter order (device arrays, and
    Python or numpy scalars) into the executable's arguments; None when there is nothing to pack.
    `checks`: (op name, kind) of each check flag in the program's last output (none: no flags);
    `strict`: each run waits for them and raises (else they are reported at the next read)."""
    __slots__ = ("compiled", "feed", "checks", "strict")

    def __init__(self, compiled, feed, checks=(), strict=False):
        self.compiled, self.feed, self.checks, self.strict = compiled, feed, checks, strict


def argument_layout(spec):
    """The executable's arguments: (the array parameters' indices, ((numpy dtype, indices of the
    scalar parameters packed into one vector of it), ...)), in that order."""
    scalars = spec.scalar_params
    arrays = tuple(i for i in range(spec.n_params) if i not in scalars)
    groups: dict = {}
    for i in sorted(scalars):
        groups.setdefault(np_dtype(spec.entries[i][2]), []).append(i)
    return arrays, tuple((dt, tuple(ix)) for dt, ix in groups.items())


def _feeder(arrays, groups):
    if not groups:
        return None
    asarray = np.array

    def feed(values):
        out = [values[i] for i in arrays]
        for dt, ix in groups:
            out.append(asarray([values[i] for i in ix], dtype=dt))
        return out
    return feed


def build_function(spec, checks: list | None = None):
    """The program as a Python function of its array parameters followed by one packed vector per
    scalar dtype (traced once by jax.jit). With `checks` (a list), the lowerings' index and
    division checks become one more output, a vector of flags; tracing fills `checks` with each
    flag's (op name, kind)."""
    entries, n_params, outputs = spec.entries, spec.n_params, spec.outputs
    arrays, groups = argument_layout(spec)

    def program(*params):
        values = [None] * n_params
        for i, p in zip(arrays, params):
            values[i] = p
        for (_, ix), vec in zip(groups, params[len(arrays):]):
            for k, i in enumerate(ix):
                values[i] = weak_scalar(vec[k])
        flags = registry.INDEX_CHECKS = [] if checks is not None else None
        try:
            for e in entries[n_params:]:
                env = [values[j] for j in e[1]]
                n = len(flags) if flags is not None else 0
                values.append(_apply(e, env))
                if flags is not None:
                    checks.extend([(e[0].name, kind) for _, kind in flags[n:]])
        finally:
            registry.INDEX_CHECKS = None
        out = tuple(values[j] for j in outputs)
        return out + (jnp.stack([f for f, _ in flags]),) if flags else out

    return program


def param_avals(spec):
    arrays, groups = argument_layout(spec)
    entries = spec.entries
    return ([jax.ShapeDtypeStruct(entries[i][1], np_dtype(entries[i][2])) for i in arrays]
            + [jax.ShapeDtypeStruct((len(ix),), dt) for dt, ix in groups])


def compile_spec(spec) -> Program:
    """Lower and compile; counts CompileTime."""
    check_not_forked()
    checks = [] if registry.index_checks_enabled() else None
    with metrics.timed("CompileTime"), x64(True):
        fn = build_function(spec, checks)
        compiled = jax.jit(fn).lower(*param_avals(spec)).compile()
    return Program(compiled, _feeder(*argument_layout(spec)), tuple(checks or ()),
                   registry.index_checks_mode() == "strict")

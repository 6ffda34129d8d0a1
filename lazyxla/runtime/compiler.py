"""GraphSpec -> JAX function -> XLA executable."""
from __future__ import annotations

import functools
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch

from lazyxla import metrics
from lazyxla.jaxenv import check_not_forked, device_scalar, np_dtype, x64
from lazyxla.ir.node import Slot, inverse_perm, physical_shape
from lazyxla.lowering import registry
from lazyxla.lowering.registry import weak_scalar
from lazyxla.runtime import channels_last, tiering


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
    if want == _E4M3FN and value.dtype != jnp.bool_:
        # PyTorch saturates (inf too, and integers: 500 gives 448); XLA would give NaN. The clip
        # runs in float32 for narrow sources: e4m3fnuz cannot hold 448 (every element was NaN)
        if not jnp.issubdtype(value.dtype, jnp.floating) or value.dtype.itemsize < 4:
            value = value.astype(jnp.float32)
        value = jnp.clip(value, -448, 448)
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
    """A compiled program and how to feed it. Every parameter is one argument, in graph order; a
    runtime scalar is a 0-dim array. (Packed into one vector, each kernel that read a scalar sliced
    its own element, so an optimizer's update compiled one kernel per parameter where one per
    shape serves.) `feed(values)` turns values in parameter order (device arrays, and Python or
    numpy scalars) into the executable's arguments; None when there is no scalar to convert.
    `checks`: (op name, kind) of each check flag in the program's last output (none: no flags);
    `strict`: each run waits for them and raises (else they are reported at the next read).
    `compiled` is replaced once by the optimized executable when the program was compiled quick
    (tiering.py), so callers look it up at each call."""
    __slots__ = ("compiled", "feed", "checks", "strict", "upgrade", "out_perms", "donated")

    def __init__(self, compiled, feed, checks=(), strict=False, upgrade=None, out_perms=None,
                 donated=()):
        self.compiled, self.feed, self.checks, self.strict = compiled, feed, checks, strict
        # the positions of the arguments the executable takes as donated (GraphSpec.donated): a
        # caller that runs it again on the same arguments must feed fresh copies of those
        self.donated = donated
        self.upgrade = upgrade  # a quick compile's tiering.Upgrade, until the optimized one runs
        # None, or per output: the perm its array holds its value transposed by (Node.perm)
        self.out_perms = out_perms


def scalar_layout(spec):
    """((index, numpy dtype), ...) of the runtime scalar parameters."""
    return tuple((i, np_dtype(spec.entries[i][2])) for i in sorted(spec.scalar_params))


def _feeder(spec):
    scalars = scalar_layout(spec)
    if not scalars:
        return None
    seeds = frozenset(spec.rng_params)  # fresh every run: not worth keeping on the device
    plan = tuple((i, dt, i in seeds) for i, dt in scalars)

    def feed(values):
        out = list(values)
        for i, dt, seed in plan:
            out[i] = np.asarray(out[i], dt) if seed else device_scalar(out[i], dt)
        return out
    return feed


def build_function(spec, checks: list | None = None, out_perms: list | None = None):
    """The program as a Python function of its parameters (traced once by jax.jit). With `checks`
    (a list), the lowerings' index and division checks become one more output, a vector of flags;
    tracing fills `checks` with each flag's (op name, kind). A program with convolutions on the CPU
    backend is evaluated channels-last (channels_last.py); tracing then fills `out_perms` (a list)
    with the layout each output is handed back in (None: its value's; the spec's free outputs may
    come transposed). Parameters held transposed (spec.param_perms) are taken so."""
    entries, n_params, outputs = spec.entries, spec.n_params, spec.outputs
    scalars, perms = spec.scalar_params, spec.param_perms

    def program(*params):
        values = [weak_scalar(p) if i in scalars else p for i, p in enumerate(params)]
        for i, perm in perms.items():  # (the channels-last pass keeps them as they come)
            values[i] = jnp.transpose(values[i], inverse_perm(perm))
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

    if channels_last.applies(spec):
        return channels_last.channels_last(program, spec.free_outputs, out_perms)
    return program


def param_avals(spec):
    """The executable's parameters: a parameter held transposed comes in its physical shape."""
    perms = spec.param_perms
    return [jax.ShapeDtypeStruct(shape if i not in perms else physical_shape(shape, perms[i]),
                                 np_dtype(dtype))
            for i, (_, shape, dtype) in enumerate(spec.entries[:spec.n_params])]


# LLVM's optimization level for XLA's CPU kernels (XLA's default: 3). Measured on the benchmark
# suite's programs (benchmarks/opt_level.py, results/opt_level.md): level 2 compiles a transformer
# block at a new sequence length in 0.66x the time (most of a dynamic-shape step's cost), ResNet
# training's step in 0.76-0.88x, the rest in 0.92-0.98x; the programs run 0.97-1.00x as long,
# except ResNet training's, 1.02x. Outputs were bitwise equal (ResNet training: within 1.2e-10).
_CPU_OPT_LEVEL = 2
_OPT_LEVEL_FLAG = "xla_backend_optimization_level"


@functools.cache
def compile_options() -> dict:
    """The XLA options every program is compiled with: on the CPU backend, optimization level 2
    unless XLA_FLAGS names a level (which then stands); other backends keep XLA's defaults."""
    if jax.default_backend() != "cpu" or _OPT_LEVEL_FLAG in os.environ.get("XLA_FLAGS", ""):
        return {}
    return {_OPT_LEVEL_FLAG: _CPU_OPT_LEVEL}


def compile_spec(spec, quick: bool = False, donate: bool = True) -> Program:
    """Lower and compile; counts CompileTime. `quick`: compiled with tiering.QUICK_OPTIONS, and
    optimized later if it is reused. `donate=False`: the spec's donated parameters are not donated
    (for a caller that runs the executable again on the same arguments: benchmarks). Nor are they
    under strict index checks, whose error after a run keeps the inputs' values."""
    check_not_forked()
    checked = registry.index_checks_enabled()
    strict = registry.index_checks_mode() == "strict"
    donate = donate and not strict
    with metrics.timed("CompileTime"), x64(True):
        lowered, checks, out_perms = _lower(spec, checked, donate)
        compiled = lowered.compile(compiler_options=tiering.QUICK_OPTIONS if quick else compile_options())
    upgrade = None
    if quick:  # (lowered again for the upgrade: a kept Lowered held 1.3 MB per dynamic length)
        upgrade = tiering.Upgrade(functools.partial(_lower_again, spec, checked, checks, out_perms,
                                                    donate), compile_options(), spec.hash)
    return Program(compiled, _feeder(spec), checks, strict, upgrade, out_perms,
                   tuple(i for i, _ in spec.donated) if donate else ())


def _lower(spec, checked: bool, donate: bool = True):
    """(jax's Lowered program, the (op name, kind) of its check flags, its outputs' layouts: None
    where every output comes as its value, else a perm or None per output)."""
    checks = [] if checked else None
    out_perms: list = []
    donate = tuple(i for i, _ in spec.donated) if donate else ()
    with warnings.catch_warnings():  # (a backend that cannot alias an output to a donated input
        # says so once per program; the program is correct either way)
        warnings.filterwarnings("ignore", "Some donated buffers were not usable")
        lowered = jax.jit(build_function(spec, checks, out_perms), donate_argnums=donate).lower(
            *param_avals(spec))
    return lowered, tuple(checks or ()), (tuple(out_perms) if any(out_perms) else None)


def _lower_again(spec, checked: bool, checks: tuple, out_perms, donate: bool):
    lowered, again, perms = _lower(spec, checked, donate)
    if again != checks or perms != out_perms:  # (the optimized program must fill the flags and
        # hand back the layouts its Program reads)
        raise LoweringError(f"graph {spec.hash} lowered with other check flags or output layouts "
                            f"the second time")
    return lowered

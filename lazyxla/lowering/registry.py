"""The registry of lowerings: one JAX function per aten op overload, registered by decorator.

A lowering is called while a graph is traced for compilation, with the op's arguments as the aten
schema orders them: tensors become jax arrays, `Scalar` arguments become weakly typed 0-d arrays
(runtime parameters, so a changing learning rate compiles nothing new), everything else stays a
Python value. Its results are cast to the dtype PyTorch's meta kernel reported and their shapes are
checked, so a lowering may compute in whatever dtype JAX's promotion gives.

    @register(aten.add.Tensor)
    def add(x, y, alpha=1): ...

`static=True` keeps `Scalar` arguments as Python values (and part of the graph key): for ops
whose output shape depends on them (arange, linspace). `meta=True` passes `_meta=[(shape, torch.dtype), ...]` (the outputs); `random=True` passes `_key`
(a jax PRNG key drawn from the device RNG). View ops register with `view=True` and may give a
`scatter` (write a value back through the view into its base); by default the scatter is derived
from the view function by index arithmetic, which is correct for every view.
"""
from __future__ import annotations

import functools
import os
import platform
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch

from lazyxla import envflags

aten = torch.ops.aten

LOWERINGS: dict = {}  # OpOverload -> Lowering (functional ops)
VIEWS: dict = {}      # OpOverload -> Lowering (view ops)

# Index (and integer division) checks (lazyxla.set_index_checks). An XLA program cannot raise:
# out-of-range indices are clamped (reads) or dropped (writes), and an integer divided by zero
# gives -1. With checks on ("deferred", the default, or "strict"), the program being traced
# collects here one (flag, kind) per index tensor or integer divisor and returns the flags; the
# executor reports them. "off": no flags.
INDEX_CHECKS: list | None = None
INDEX_CHECK_MODES = ("off", "deferred", "strict")


def _mode_from_env() -> str:
    """A mode's name, or a flag's words as envflags reads them (true: strict, false: off)."""
    value = os.environ.get("LAZYXLA_CHECK_INDICES", "").strip().lower()
    if not value:
        return "deferred"
    if value in INDEX_CHECK_MODES:
        return value
    if value in envflags.FALSE_WORDS:
        return "off"
    if value in envflags.TRUE_WORDS:
        return "strict"
    warnings.warn(f"lazyxla: LAZYXLA_CHECK_INDICES={value!r} is none of off, deferred, strict "
                  "(or 0, 1); index checks are deferred")
    return "deferred"


_CHECKING = [_mode_from_env()]


def index_checks_mode() -> str:
    return _CHECKING[0]


def index_checks_enabled() -> bool:
    return _CHECKING[0] != "off"


def set_index_checks_mode(mode: str) -> None:
    if mode not in INDEX_CHECK_MODES:
        raise ValueError(f"lazyxla: index checks must be one of {INDEX_CHECK_MODES}, got {mode!r}")
    _CHECKING[0] = mode


class Unsupported(NotImplementedError):
    """A call that lazyxla's lowering cannot express, detected when it is recorded: the device's
    kernels run it on the CPU instead (counted as a fallback)."""


# What a flag reports: kind -> (eager's exception, its message; {ops} names the ops). The
# executor raises it. Eager checks these values before it computes; XLA computes regardless.
INDEX, ZERO_DIVISION = "index", "zero_division"
BERNOULLI_P, MULTINOMIAL_P, MULTINOMIAL_SUM, NORMAL_STD = ("bernoulli_p", "multinomial_p",
                                                           "multinomial_sum", "normal_std")
BCE_INPUT, MASKED_SCATTER_SOURCE = "bce_input", "masked_scatter_source"
SEGMENT_NEGATIVE, SEGMENT_SUM, LU_PIVOTS = "segment_negative", "segment_sum", "lu_pivots"
# indices eager rejects with a RuntimeError, not an IndexError
INDEX_BOUNDS, TARGET_RANGE, SORTER_RANGE = "index_bounds", "target_range", "sorter_range"
BAG_INDEX, BAG_OFFSETS, CTC_LENGTHS = "bag_index", "bag_offsets", "ctc_lengths"
UNPOOL_INDEX, COMPLEX_VALUE, MASK_VALUES = "unpool_index", "complex_value", "mask_values"
HISTC_RANGE, POISSON_RATE, VALUE_OVERFLOW = "histc_range", "poisson_rate", "value_overflow"
CHECK_ERRORS = {
    INDEX: (IndexError, "index out of range in {ops}", "IndexOutOfRange"),
    INDEX_BOUNDS: (RuntimeError, "index out of bounds in {ops}", "IndexOutOfRange"),
    TARGET_RANGE: (RuntimeError, "target out of range in {ops}", "IndexOutOfRange"),
    SORTER_RANGE: (RuntimeError, "torch.searchsorted(): sorter index out of range (in {ops})",
                   "IndexOutOfRange"),
    BAG_INDEX: (RuntimeError, "embedding_bag: an index of input is not in the valid range "
                              "[0, num_embeddings) (in {ops})", "IndexOutOfRange"),
    BAG_OFFSETS: (RuntimeError, "embedding_bag: offsets[0] has to be 0 and offsets[-1] can not be "
                                "greater than input's length (in {ops})", "IndexOutOfRange"),
    CTC_LENGTHS: (RuntimeError, "ctc_loss: input_lengths must be at most the input's length, "
                                "target_lengths at most the targets' length (and, for "
                                "concatenated targets, add up to it) (in {ops})", "IndexOutOfRange"),
    UNPOOL_INDEX: (RuntimeError, "Found an invalid max index (outside its output plane, in {ops})",
                   "IndexOutOfRange"),
    ZERO_DIVISION: (RuntimeError, "ZeroDivisionError: integer division by zero in {ops}",
                    "ZeroDivision"),
    BERNOULLI_P: (RuntimeError, "Expected p_in >= 0 && p_in <= 1 to be true, but got false "
                                "(a probability outside [0, 1] or NaN, in {ops})",
                  "InvalidDistribution"),
    MULTINOMIAL_P: (RuntimeError, "probability tensor contains either `inf`, `nan` or element < 0 "
                                  "(in {ops})", "InvalidDistribution"),
    MULTINOMIAL_SUM: (RuntimeError, "invalid multinomial distribution (sum of probabilities <= 0) "
                                    "(in {ops})", "InvalidDistribution"),
    NORMAL_STD: (RuntimeError, "normal expects all elements of std >= 0.0 (in {ops})",
                 "InvalidDistribution"),
    POISSON_RATE: (RuntimeError, "invalid Poisson rate, expected rate to be non-negative (a "
                                 "negative or NaN rate, in {ops})", "InvalidDistribution"),
    BCE_INPUT: (RuntimeError, "all elements of input should be between 0 and 1 (in {ops})",
                "InvalidInput"),
    MASKED_SCATTER_SOURCE: (RuntimeError, "Number of elements of source < number of ones in mask "
                                          "(in {ops})", "InvalidInput"),
    SEGMENT_NEGATIVE: (RuntimeError, "segment_reduce(): a segment length is negative (in {ops})",
                       "InvalidInput"),
    SEGMENT_SUM: (RuntimeError, "segment_reduce(): Expected all rows of lengths along axis to sum "
                                "to data.size(lengths.dim()-1) when !unsafe. (in {ops})",
                  "InvalidInput"),
    MASK_VALUES: (RuntimeError, "shape mismatch: value tensor cannot be broadcast to indexing "
                                "result (its length along a boolean mask's dim is not the mask's "
                                "count of true elements, in {ops})", "InvalidInput"),
    COMPLEX_VALUE: (RuntimeError, "value cannot be converted to type of the tensor without "
                                  "overflow (a complex value with an imaginary part, in {ops})",
                    "InvalidInput"),
    VALUE_OVERFLOW: (RuntimeError, "value cannot be converted to type of the tensor without "
                                   "overflow (a 0-d tensor value outside the tensor's dtype's "
                                   "range, in {ops})", "InvalidInput"),
    HISTC_RANGE: (RuntimeError, "torch.histc: range of [min, max] is not finite (the data's "
                                "own range holds a NaN or inf, in {ops})", "InvalidInput"),
    LU_PIVOTS: (RuntimeError, "Pivots given to lu_solve must all be between 1 and LU.size(-2). "
                              "Did you properly pass the result of lu_factor? (in {ops})",
                "InvalidInput"),
}


def check_index(i, n, negative=True, kind=INDEX) -> None:
    """Flag index values outside [-n, n) ([0, n) where PyTorch takes no negative index) while a
    checked program is traced (else nothing). `kind`: the error eager raises (CHECK_ERRORS)."""
    if INDEX_CHECKS is not None:
        out = i >= n
        if not jnp.issubdtype(i.dtype, jnp.unsignedinteger):
            out = out | (i < (-n if negative else 0))
        INDEX_CHECKS.append((jnp.any(out), kind))


def check_fits(value, dtype) -> None:
    """Flag a 0-d tensor `value` that eager's checked conversion to `dtype` refuses (c10's
    `overflows`, where masked_fill and index_fill convert a tensor value's `.item()`): outside
    a float dtype's finite range (inf and NaN pass); outside an integer dtype's range, NaN and inf
    too for a float value; for an unsigned dtype an integer value may be negative down to -max,
    which wraps."""
    if INDEX_CHECKS is None:
        return
    v, dt = jnp.asarray(value), np.dtype(dtype)
    if dt == np.bool_ or v.dtype == np.bool_ or jnp.issubdtype(dt, jnp.complexfloating) or \
            jnp.iscomplexobj(v):
        return  # (a complex value into a real tensor: COMPLEX_VALUE)
    if jnp.issubdtype(dt, jnp.floating):
        w, info = v.astype(jnp.float64), jnp.finfo(dt)
        bad = jnp.isfinite(w) & ((w < float(info.min)) | (w > float(info.max)))
    elif jnp.issubdtype(v.dtype, jnp.floating):
        w, info = v.astype(jnp.float64), jnp.iinfo(dt)
        bad = ~((w >= float(info.min)) & (w <= float(info.max)))
    else:
        w, info = v.astype(jnp.int64), jnp.iinfo(dt)
        low = -int(info.max) if info.min == 0 else int(info.min)
        bad = (w > info.max) | (w < low) if info.max <= np.iinfo(np.int64).max else w < low
    INDEX_CHECKS.append((jnp.any(bad), VALUE_OVERFLOW))


def check_divisor(x, y) -> None:
    """Flag a division of integer `x` by zero (eager raises ZeroDivisionError; XLA's gives -1)
    while a checked program is traced."""
    if INDEX_CHECKS is not None and jnp.issubdtype(jnp.asarray(x).dtype, jnp.integer):
        INDEX_CHECKS.append((jnp.any(jnp.asarray(y) == 0), ZERO_DIVISION))


def check_values(bad, kind) -> None:
    """Flag any true element of `bad` as a `kind` error (CHECK_ERRORS) while a checked program is
    traced: values eager rejects (a probability outside [0, 1], a negative std, a
    binary_cross_entropy input outside [0, 1]), which XLA would compute with regardless."""
    if INDEX_CHECKS is not None:
        INDEX_CHECKS.append((jnp.any(bad), kind))


class Lowering:
    __slots__ = ("name", "fn", "meta", "random", "view", "scatter", "op", "static", "like",
                 "runtime", "fill", "unchanged", "offset")

    def __init__(self, op, fn, meta=False, random=False, view=False, scatter=None, static=False,
                 like=False, runtime=(), fill=None, unchanged=None):
        self.op, self.fn, self.meta, self.random, self.view = op, fn, meta, random, view
        self.static = static
        # runtime: names of `float` arguments that are runtime values too (an optimizer's lr,
        # which a scheduler changes every step); by default only `Scalar` arguments are
        self.runtime = frozenset(runtime)
        # like: a tensor first argument gives only its shape and dtype (ones_like, fill, new_*):
        # it is not an input of the node, so the result depends on nothing pending
        self.like = like
        # fill: the value of every element, whatever the arguments (zeros and empty 0, ones 1):
        # a program of such ops alone is made on the host, with no compile
        self.fill = fill
        # unchanged(kwargs): names of the lists an in-place form declares written (Tensor(a!)[])
        # whose outputs are their inputs for these arguments (a fused optimizer's grads without a
        # GradScaler): the kernel writes nothing back into them, as eager's kernel does not
        self.unchanged = unchanged
        self.name = str(op) if not isinstance(op, str) else op
        # offset(node) -> (start, Lowering, attrs): the same view (or its write) of a node
        # of this op with its start as the node's last input, a runtime scalar (ir/graph.py)
        self.offset = None
        self.scatter = None
        if view:
            self.scatter = Lowering(f"scatter:{self.name}", scatter or _derived_scatter(fn), meta=True)

    def __repr__(self):
        return f"Lowering({self.name})"


def register(*ops, meta=False, random=False, view=False, scatter=None, static=False, like=False,
             runtime=(), fill=None, unchanged=None):
    def deco(fn):
        for op in ops:
            low = Lowering(op, fn, meta=meta, random=random, view=view, scatter=scatter,
                           static=static, like=like, runtime=runtime, fill=fill,
                           unchanged=unchanged)
            (VIEWS if view else LOWERINGS)[op] = low
        return fn
    return deco


def _derived_scatter(view_fn):
    """scatter(base, value, *view_args): write `value` into the elements of `base` that the view
    selects. The view is applied to an iota of base positions, which names, for every element of the
    view, the flat base position it aliases."""
    def scatter(base, value, *args, _meta, **kwargs):
        positions = view_fn(jnp.arange(base.size, dtype=jnp.int64).reshape(base.shape), *args, **kwargs)
        flat = base.reshape(-1).at[positions.reshape(-1)].set(value.reshape(-1).astype(base.dtype))
        return flat.reshape(base.shape)
    return scatter


def overlapping_scatter(view_fn):
    """The derived scatter for views whose elements can share a base element (unfold with step <
    size, as_strided): a write changes one copy of a shared element and leaves the others stale,
    so only changed elements are written (unchanged NaNs count as unchanged)."""
    def scatter(base, value, *args, _meta, **kwargs):
        positions = view_fn(jnp.arange(base.size, dtype=jnp.int64).reshape(base.shape), *args,
                            **kwargs).reshape(-1)
        flat = base.reshape(-1)
        value = value.reshape(-1).astype(base.dtype)
        old = flat[positions]
        changed = value != old
        if jnp.issubdtype(base.dtype, jnp.inexact):
            changed = changed & ~(jnp.isnan(value) & jnp.isnan(old))
        positions = jnp.where(changed, positions, base.size)  # out of range: dropped
        return flat.at[positions].set(value, mode="drop").reshape(base.shape)
    return scatter


def lowering_for(op):
    return LOWERINGS.get(op)


def is_scalar_type(arg_type) -> bool:
    """Schema `Scalar`, `Scalar?` and `Scalar[]` arguments are runtime values."""
    return "number" in str(arg_type) or "Scalar" in str(arg_type)


# out= overloads whose functional overload has other argument names
_OUT_TO_FUNCTIONAL = {"aten::arange.out": "aten::arange.default",
                      "aten::arange.start_out": "aten::arange.start_step"}


def overload_named(name: str):
    """aten's `packet.overload` by name ("add.Tensor"), or None where this PyTorch lacks it."""
    packet, overload = name.split(".")
    return getattr(getattr(aten, packet, None), overload, None)


@functools.lru_cache(maxsize=None)
def functional_variant(op):
    """The functional overload computing what an in-place (`add_`) or out= (`add.out`) op writes:
    same base name without the trailing underscore, and the same non-out arguments. None if there
    is none."""
    schema = op._schema
    full = f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
    if full in _OUT_TO_FUNCTIONAL:
        base_name, ov = _OUT_TO_FUNCTIONAL[full].split("::")[1].split(".")
        return getattr(getattr(aten, base_name), ov)
    name = schema.name.split("::")[1]
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    if not hasattr(aten, base):
        return None
    want = [(a.name, str(a.type)) for a in schema.arguments if not a.is_out]
    packet = getattr(aten, base)
    cands = [getattr(packet, ov) for ov in packet.overloads()]
    cands = [c for c in cands if not any(a.alias_info is not None and a.alias_info.is_write
                                         for a in c._schema.arguments)]
    for exact in (True, False):  # same names and types first, then same names
        for c in cands:
            got = [(a.name, str(a.type)) for a in c._schema.arguments]
            if got == want if exact else [g[0] for g in got] == [w[0] for w in want]:
                return c
    return None


def mutated_args(op) -> tuple[int, ...]:
    """Positions (in schema order) of arguments the op writes."""
    return tuple(i for i, a in enumerate(op._schema.arguments)
                 if a.alias_info is not None and a.alias_info.is_write)


def astype(x, dt):
    """x converted to dtype dt. A bool becomes 1 or 0 by a select: XLA rewrites products and
    quotients of a converted bool into selects (`x * mask.float()` -> select(mask, x, 0)), which
    would give 0 where eager's False * NaN or * inf, or False / 0, gives NaN. A complex number is
    true where either part is nonzero, as in c10 (XLA's conversion reads the real part only)."""
    if x.dtype == jnp.bool_ and (jnp.issubdtype(dt, jnp.inexact)):
        return jnp.where(x, jnp.ones((), dt), jnp.zeros((), dt))
    if jnp.issubdtype(x.dtype, jnp.complexfloating) and not jnp.issubdtype(dt, jnp.complexfloating):
        if dt == jnp.bool_:
            return x != 0
        x = real_part(x)
    if jnp.issubdtype(x.dtype, jnp.floating):
        via = _FLOAT_TO_INT_VIA.get(jnp.dtype(dt))
        if via is not None:
            x = _truncated(x, via)
    return jax.lax.convert_element_type(x, dt)


# Floats become narrow integers through a wider one, then wrap, as eager: c10 converts to uint8
# through int64 (TypeCast.h: -1.0 is 255 with every compiler), and compiled C++ converts to
# int8/int16/uint16 through int32 and to uint32 through int64. XLA saturates (-1.0 -> 0,
# 300.0 -> 255 as uint8).
_FLOAT_TO_INT_VIA = {jnp.dtype(jnp.uint8): jnp.int64, jnp.dtype(jnp.uint32): jnp.int64,
                     jnp.dtype(jnp.int8): jnp.int32, jnp.dtype(jnp.int16): jnp.int32,
                     jnp.dtype(jnp.uint16): jnp.int32}
# x86's conversion gives NaN and values out of range the type's least value ("integer
# indefinite"), where XLA saturates and gives NaN 0: on x86 hosts, eager's CPU kernels' values
# (NaN -> int64 is -2**63). Other CPUs' conversions saturate, as XLA's.
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
if _X86:
    _FLOAT_TO_INT_VIA.update({jnp.dtype(jnp.int32): jnp.int32, jnp.dtype(jnp.int64): jnp.int64})


def _truncated(x, itype):
    """Float x truncated to integer type itype as the host CPU's conversion does."""
    if not _X86:
        return jax.lax.convert_element_type(x, itype)
    if x.dtype.itemsize < 4:  # (exact in float32; float8_e4m3fn cannot hold the bounds: as
        x = x.astype(jnp.float32)  # NaN every element was outside)
    low = jnp.iinfo(itype).min
    inside = (x >= float(low)) & (x < -float(low))  # (false for NaN)
    return jnp.where(inside, jax.lax.convert_element_type(x, itype), jnp.array(low, itype))


_warned_complex_cast = False


def real_part(x):
    """A complex x's real part, where eager casts it to a real dtype: eager's warning, once per
    process as eager's (TORCH_WARN_ONCE), given while the program is traced (JAX's own cast of
    complex to real warns of its deprecation, once per call site)."""
    global _warned_complex_cast
    if not _warned_complex_cast:
        _warned_complex_cast = True
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning,
                      stacklevel=2)
    return jnp.real(x)


def weak_scalar(x):
    """A 0-d array that promotes like a Python scalar (weak type), as PyTorch's Scalar does."""
    from jax._src.lax import lax as _lax  # JAX exposes weak typing only through this
    return _lax._convert_element_type(x, x.dtype, weak_type=True)


def load_all():
    """Import every op-family module so that its lowerings register."""
    import importlib
    import pkgutil
    from lazyxla import lowering
    for m in pkgutil.iter_modules(lowering.__path__):
        if m.name not in ("registry",) and not m.name.startswith("_"):
            importlib.import_module(f"lazyxla.lowering.{m.name}")

"""Checks of runtime scalar arguments, run on every call (ir/meta.py: VALUE_CHECKS).

Scalar-typed arguments (fill values, clamp bounds, exponents, alpha, norm orders) are runtime
values: a signature holds only their type, so the meta kernel and checks.py's checks, which run
once per signature, see the first value only. Each check here costs a comparison or two unless the
value is one eager may reject; then eager's own check decides, on stand-ins (eager's message)."""
from __future__ import annotations

import math

import torch

from lazyxla.ir.meta import VALUE_CHECKS
from .checks import _eager_scalar_checks, _inexact, _with_inplace

aten = torch.ops.aten

_INT_LIMITS = {dt: (torch.iinfo(dt).min, torch.iinfo(dt).max)
               for dt in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)}
_FLOAT_MAX = {dt: torch.finfo(dt).max
              for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}


def _suspect(v, dtype) -> bool:
    """False when the number v surely converts to dtype without overflow."""
    tv = type(v)
    if tv is complex:  # a real dtype takes one with no imaginary part, by its real part
        if dtype.is_complex or dtype is torch.bool:  # (bool takes any)
            return False
        if v.imag:
            return True
        v, tv = v.real, float
    if tv is not int and tv is not float:  # bools fit anything; tensors and None are not values
        return False
    limits = _INT_LIMITS.get(dtype)
    if limits is not None:
        lo, hi = limits
        if tv is float:
            return not lo <= v <= hi  # (NaN too)
        return not (-hi if lo == 0 else lo) <= v <= hi  # unsigned: negatives wrap, as in eager
    top = _FLOAT_MAX.get(dtype)
    return top is not None and abs(v) > top and abs(v) != float("inf")  # inf and NaN fit


def _target_dtype(args, kwargs):
    dtype = kwargs.get("dtype")
    if dtype is not None:
        return dtype
    return next((a.dtype for a in args if isinstance(a, torch.Tensor)), torch.int64)


_CPU = torch.device("cpu")


def _eager(op, sizes=None, elements=False):
    """checks.py's eager checks, also on the arguments a fed program's checks hold
    (dispatch.SourcedNumbers.checks): meta stand-ins, and the meta device where the op took the
    lazyxla one (`full(2, n, dtype=torch.int8, device=...)`), which eager's meta kernels take
    without checking the value. Meta devices run on the CPU."""
    run = _eager_scalar_checks(op, sizes, elements)

    def fn(*args, **kwargs):
        device = kwargs.get("device")
        if type(device) is torch.device and device.type == "meta":
            kwargs = {**kwargs, "device": _CPU}
        run(*args, **kwargs)
    return fn


def _value_check(op, sizes=None, elements=False):
    eager = _eager(op, sizes, elements)

    def fn(*args, **kwargs):
        dtype = _target_dtype(args, kwargs)
        if any(_suspect(v, dtype) for v in args) or any(_suspect(v, dtype) for v in kwargs.values()):
            eager(*args, **kwargs)
    return fn


def value_check(*ops):
    def deco(fn):
        for op in ops:
            VALUE_CHECKS[op] = fn
        return fn
    return deco


for _op in _with_inplace(("fill.Scalar", "masked_fill.Scalar", "index_fill.int_Scalar",
                          "scalar_tensor.default", "full_like.default", "clamp.default",
                          "clamp_min.default", "clamp_max.default", "threshold.default",
                          "hardtanh.default", "lerp.Scalar")):
    value_check(_op)(_value_check(_op))
value_check(aten.full.default)(_value_check(aten.full.default, sizes=0))
value_check(aten.new_full.default)(_value_check(aten.new_full.default, sizes=1))


@value_check(*_with_inplace(["pow.Tensor_Scalar"]))
def _pow(x, exponent):
    if type(exponent) is int and exponent < 0 and not _inexact(x.dtype):
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if type(exponent) is int and x.dtype in _INT_LIMITS and _suspect(exponent, x.dtype):
        torch.empty(0, dtype=x.dtype).pow(exponent)  # eager's overflow error (int8 ** 300)


SPARSE_EMBEDDING = ("lazyxla: an embedding with sparse=True has sparse gradients, and lazyxla has "
                    "dense tensors only (PyTorch gives a Python-registered device no sparse "
                    "layouts). Use sparse=False: the gradient is the same, dense.")


@value_check(aten.embedding.default)
def _sparse_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # The backward would make a sparse gradient, which a Python-registered device cannot hold:
    # said here, at the forward, rather than by the dispatcher's error in the backward.
    if sparse and weight.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(SPARSE_EMBEDDING)  # (NotImplementedError would mean: run on the CPU)


# The dtypes that a fed number of the type can overflow (a fed int fits int64, a fed float is
# finite): there a fed program runs the alpha check on every call's value.
_NARROW_FOR = {int: frozenset({torch.int8, torch.uint8, torch.int16, torch.int32, torch.float16,
                               torch.complex32}),
               float: frozenset({torch.float16, torch.bfloat16, torch.complex32})}
_WIDE_FLOATS = frozenset({torch.float32, torch.float64, torch.complex64, torch.complex128})
_FLOAT32_MAX = torch.finfo(torch.float32).max


def _alpha_of(args, kwargs):
    return kwargs.get("alpha", args[2] if len(args) > 2 else 1)


def _result_dtype(args):
    x, other = args[0], args[1]
    if isinstance(other, torch.Tensor) and other.dtype is x.dtype:
        return x.dtype
    return torch.result_type(x, other)


def _alpha_check(op):
    """Eager converts alpha to the result's dtype: a float alpha of an integer result and a bool
    one of another are refused by type, a number the dtype cannot hold by value
    (`add(int8, int8, alpha=300)`). The value's check (by_value) runs where its type or size
    leaves the answer open; a fed program runs it on every call's value only where that can
    overflow (an int alpha of an int8 result; a float alpha of a float32 one, an lr, is
    decided by its type)."""
    eager = _eager_scalar_checks(op)

    def by_value(*args, **kwargs):
        alpha = _alpha_of(args, kwargs)
        ta, dtype = type(alpha), _result_dtype(args)
        if ta is int:
            bad = _suspect(alpha, dtype)
        elif ta is float:
            bad = not _inexact(dtype) or _suspect(alpha, dtype)
        else:  # bool, complex: eager decides
            bad = True
        if bad:
            eager(*args, **kwargs)

    def fn(*args, **kwargs):
        if not kwargs and len(args) <= 2:  # (`a + b` passes no alpha)
            return
        alpha = _alpha_of(args, kwargs)
        ta = type(alpha)
        if ta is int and -128 <= alpha <= 127:  # fits any dtype (a uint8 wraps it, as eager)
            return
        if ta is float and not abs(alpha) > _FLOAT32_MAX and _result_dtype(args) in _WIDE_FLOATS:
            return  # (an lr)
        by_value(*args, **kwargs)

    def fed(args, kwargs):
        """What a fed program runs on each call's alpha (dispatch.SourcedNumbers): by the result's
        dtype, not the traced value (a fed program's stand-ins may be small)."""
        narrow = _NARROW_FOR.get(type(_alpha_of(args, kwargs)))
        return by_value if narrow is not None and _result_dtype(args) in narrow else None
    fn.fed = fed
    return fn


for _op in _with_inplace(("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar")):
    value_check(_op)(_alpha_check(_op))


def _when(suspect, op, elements=False):
    """A check that runs eager's op on stand-ins when suspect(*args, **kwargs)."""
    eager = _eager(op, elements=elements)

    def fn(*args, **kwargs):
        if suspect(*args, **kwargs):
            eager(*args, **kwargs)
    return fn


def _register(names, suspect, elements=False):
    for op in _with_inplace(names):
        value_check(op)(_when(suspect, op, elements))


def _outside(v, lo, hi, low_open=False) -> bool:
    """v is not a real number in [lo, hi] ((lo, hi] with low_open): NaN and complex are outside."""
    if type(v) not in (int, float, bool):
        return True
    return not ((lo < v) if low_open else (lo <= v)) or not v <= hi


# renorm: a positive norm order, a maxnorm >= 0
_register(["renorm.default"], lambda x, p, dim, maxnorm: _outside(p, 0, math.inf, low_open=True)
          or _outside(maxnorm, 0, math.inf))
# softshrink: 0 <= lambda <= the input dtype's largest value
_register(["softshrink.default"],
          lambda x, lambd=0.5: _outside(lambd, 0, _FLOAT_MAX.get(x.dtype, math.inf)))
# a fill value the dtype cannot hold; scatter's CPU kernel returns before converting it when
# there is nothing to write, so its stand-ins keep their shapes (indices 0, always in range)
for _op in _with_inplace(["constant_pad_nd.default"]):
    value_check(_op)(_value_check(_op))
# addcmul's and addcdiv's value: converted to the result's dtype (`addcmul(int8, ..., value=300)`;
# a float16 result takes it as a float)
for _op in _with_inplace(["addcmul.default", "addcdiv.default"]):
    value_check(_op)(_value_check(_op))
for _op in _with_inplace(["scatter.value", "scatter.value_reduce"]):
    value_check(_op)(_value_check(_op, elements=True))


def _no_identity(ord) -> bool:
    """A norm order whose reduction has no identity: eager refuses it over an empty tensor."""
    return type(ord) in (int, float) and (ord < 0 or ord == math.inf)


# vector norms of an empty tensor (eager words the error by the dims reduced: shapes are kept,
# and hold no elements)
_register(["linalg_vector_norm.default", "norm.Scalar", "norm.ScalarOpt_dtype",
           "norm.ScalarOpt_dim", "norm.ScalarOpt_dim_dtype"],
          lambda x, ord=2, *a, **k: x.numel() == 0 and _no_identity(ord), elements=True)
# _foreach_norm: also an order that is not an int or float, and tensors that are not floating or
# complex (its meta kernel takes any)
_register(["_foreach_norm.Scalar"],
          lambda xs, ord=2, *a, **k: type(ord) not in (int, float)
          or any(not _inexact(x.dtype) for x in xs)
          or (_no_identity(ord) and any(x.numel() == 0 for x in xs)), elements=True)


def _negative_int_power(xs, exponent, *_):
    """Integer tensors to negative integer powers: eager refuses them."""
    exps = exponent if isinstance(exponent, (list, tuple)) else [exponent] * len(xs)
    return any(type(e) is int and e < 0 and not _inexact(x.dtype) for x, e in zip(xs, exps))


def _foreach_unfit(pos):
    """A _foreach op whose scalar (or list of scalars) at `pos` a tensor's dtype cannot hold:
    eager's CPU _foreach ops run the plain op per tensor, which converts the scalar to its
    dtype (clamp bounds, exponents, addcmul's value) and refuses one that overflows."""
    def suspect(xs, *args, **kwargs):
        rest = list(args) + list(kwargs.values())
        s = rest[pos - 1] if len(rest) >= pos else None
        if isinstance(s, (list, tuple)):
            return any(_suspect(v, x.dtype) for x, v in zip(xs, s))
        return any(_suspect(s, dt) for dt in {x.dtype for x in xs})  # (once per dtype)
    return suspect


for _name in ("clamp_min", "clamp_max", "maximum", "minimum"):
    _register([f"_foreach_{_name}.Scalar", f"_foreach_{_name}.ScalarList"], _foreach_unfit(1))
for _name in ("addcmul", "addcdiv"):
    _register([f"_foreach_{_name}.Scalar", f"_foreach_{_name}.ScalarList"], _foreach_unfit(3))
_pow_unfit = _foreach_unfit(1)
_register(["_foreach_pow.Scalar", "_foreach_pow.ScalarList"],
          lambda xs, e: _negative_int_power(xs, e) or _pow_unfit(xs, e))
# index_add converts alpha to the tensor's dtype (a float alpha of an integer tensor truncated),
# after returning early on an empty tensor
_register(["index_add.default"], lambda x, dim, index, source, alpha=1: _suspect(alpha, x.dtype),
          elements=True)

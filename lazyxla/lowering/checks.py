"""Argument checks that eager's CPU kernels make and PyTorch's meta kernels miss.

Shape and dtype inference runs the meta kernel, which raises most of eager's errors at the call.
Where it lets bad arguments through, the XLA program would compute something anyway (a softmax
over a wrapped dim, a matmul that promotes, a convolution with negative padding) or fail at sync.
These checks raise eager's error, with its message, once per signature (ir/meta.py: CHECKS; a
signature holds the values of int, bool and float arguments, so a new value is checked again).
Scalar-typed arguments are runtime values, keyed by their type only: their checks run on every
call (value_checks.py).
"""
from __future__ import annotations

import functools
import inspect
import math
import warnings

import torch

from lazyxla.ir.meta import CHECKS, stand_in
from lazyxla.jaxenv import cpp_type_name, type_name
from .registry import functional_variant, mutated_args, overload_named

aten = torch.ops.aten


def check(*ops):
    def deco(fn):
        for op in ops:
            earlier, f = CHECKS.get(op), _out_dropped(op, fn)
            CHECKS[op] = f if earlier is None else _both(earlier, f)
        return fn
    return deco


def _out_dropped(op, fn):
    """fn, called on an out= overload without its out= tensors where it takes none (a check of
    the functional op's arguments: index_copy's, for index_copy.out)."""
    outs = frozenset(a.name for a in op._schema.arguments if a.is_out)
    try:
        inspect.signature(fn).bind_partial(**dict.fromkeys(outs))
    except TypeError:
        return lambda *args, **kwargs: fn(*args, **{k: v for k, v in kwargs.items() if k not in outs})
    return fn


def _with_inplace(names):
    """The named overloads and their in-place forms (whose meta kernels run first and word some
    of these errors otherwise). An in-place form is found by what it computes, not by name:
    pow.Tensor_Scalar's is pow_.Scalar."""
    for name in names:
        op = overload_named(name)
        if op is None:
            continue
        yield op
        packet = getattr(aten, op._schema.name.split("::")[1] + "_", None)
        for overload in packet.overloads() if packet is not None else ():
            inplace = getattr(packet, overload)
            if mutated_args(inplace) and functional_variant(inplace) is op:
                yield inplace


def _both(first, second):
    def fn(*args, **kwargs):
        first(*args, **kwargs)
        second(*args, **kwargs)
    return fn


@check(aten._softmax.default, aten._log_softmax.default)
def _softmax(x, dim, half_to_float=False):
    _dim_in_range(x, dim)
    _floating(x, "softmax")


def fail(message, error=RuntimeError):
    raise error(message)


def _inexact(dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _require(dtype, kernel, allowed=_inexact):
    """Eager's error of a CPU kernel that lacks `dtype`."""
    if not allowed(dtype):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{type_name(dtype)}\'')


def _floating(x, kernel):
    _require(x.dtype, kernel)


def ops_named(*names):
    """Every overload of the named aten ops."""
    return [getattr(getattr(aten, n), o) for n in names for o in getattr(aten, n).overloads()]


def _std_var(name):
    def fn(x, *args, **kwargs):
        if not _inexact(x.dtype):
            raise RuntimeError(f"{name} only support floating point and complex dtypes")
    return fn


check(*ops_named("var", "std"))(_std_var("std and var"))
check(*ops_named("var_mean"))(_std_var("var_mean"))
check(*ops_named("std_mean"))(_std_var("std_mean"))


def _degrees_of_freedom(op):
    """Eager's warning where a std or var divides by zero or less (one row, correction >= n):
    the result is inf or NaN, and nothing else would say why. Made once per signature, which
    holds a Python correction's type, not its value. An empty input's comes from eager's own
    kernel, which meta.py runs on empty stand-ins."""
    names = [a.name for a in op._schema.arguments]
    fname = op._schema.name.split("::")[1]

    def fn(*args, **kwargs):
        bound = dict(zip(names, args), **kwargs)
        x, dim = bound["self"], bound.get("dim")
        if x.numel() == 0:
            return
        correction = bound.get("correction")
        if correction is None:
            correction = 0 if bound.get("unbiased") is False else 1
        if isinstance(dim, int):
            dim = [dim]
        elif dim is not None and not all(isinstance(d, int) for d in dim):
            return  # (dimension names)
        reduced_dims = {d % max(x.dim(), 1) for d in dim or ()}
        kept = math.prod(n for i, n in enumerate(x.shape) if i not in reduced_dims) if dim else 1
        reduced = x.numel() // kept if kept else 0
        if reduced - correction <= 0:
            warnings.warn(f"{fname}(): degrees of freedom is <= 0. Correction should be strictly "
                          "less than the reduction factor (input numel divided by output numel).",
                          stacklevel=2)
    return fn


for _op in ops_named("var", "std", "var_mean", "std_mean"):
    check(_op)(_degrees_of_freedom(_op))


@check(*ops_named("lerp"))
def _lerp(x, *args, **kwargs):
    # (tensors of other dtypes: eager says so first; the dtype probe raises its words)
    if all(t.dtype == x.dtype for t in args if isinstance(t, torch.Tensor)):
        _floating(x, "lerp_kernel_scalar")


# no random kernel draws float8 values (eager's CPU and CUDA kernels lack them all)
_FLOAT8 = frozenset((torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                     torch.float8_e5m2fnuz))


def _not_float8(dtype) -> bool:
    return dtype not in _FLOAT8


def _drawn(allowed):
    return lambda dtype: allowed(dtype) and _not_float8(dtype)


def _random_floating(kernel):
    def fn(*args, dtype=None, **kwargs):
        like = next((a for a in args if isinstance(a, torch.Tensor)), None)
        dtype = dtype if dtype is not None else (like.dtype if like is not None else None)
        if dtype is not None:
            _require(dtype, kernel, _drawn(_inexact))
    return fn


check(*ops_named("normal", "normal_functional", "randn", "randn_like"))(_random_floating("normal_kernel_cpu"))
check(*ops_named("uniform", "rand", "rand_like"))(_random_floating("check_uniform_bounds"))


def _random_dtypes(kernel, allowed):
    def fn(x, *args, **kwargs):
        _require(x.dtype, kernel, _drawn(allowed))
    return fn


def _real(dtype) -> bool:
    return not dtype.is_complex


def _floating_only(dtype) -> bool:
    return dtype.is_floating_point


def _real_number(dtype) -> bool:  # integers and floating types: no bool, no complex
    return dtype is not torch.bool and not dtype.is_complex


check(*ops_named("log_normal", "log_normal_"))(_random_dtypes("log_normal_cpu", _floating_only))
check(*ops_named("geometric", "geometric_"))(_random_dtypes("geometric_cpu", _real_number))


# bernoulli: self is never complex; probabilities (a tensor p, or self itself) are floating
check(aten.bernoulli.p, aten.bernoulli_.float)(_random_dtypes("bernoulli_scalar_cpu_", _real))


@check(aten.bernoulli.default, aten.bernoulli.Tensor, aten.bernoulli_.Tensor)
def _bernoulli(x, p=None, generator=None):
    _require(x.dtype, "bernoulli_tensor_cpu_self_", _drawn(_real))
    _require((x if p is None else p).dtype, "bernoulli_tensor_cpu_p_", _floating_only)
    if p is not None and x.numel():  # p expands to self's shape (eager returns at once on none)
        torch.empty((), dtype=p.dtype).expand(p.shape).expand(x.shape)  # (eager's error)


check(aten.random.default)(_random_dtypes("random_kernel_cpu", _real))
check(*ops_named("exponential", "exponential_"))(_random_dtypes("exponential_cpu", _not_float8))
check(*ops_named("cauchy", "cauchy_"))(_random_dtypes("cauchy_cpu", _not_float8))


# randperm's n (n - 1, its largest value) in the dtype: eager converts it with an overflow check,
# and a floating dtype must hold every int up to it (bfloat16's precision is not checked)
_RANDPERM_MAX = {torch.float16: ((1 << 11) + 1, "2049 for Half"),
                 torch.float32: ((1 << 24) + 1, "2^24+1 for Float"),
                 torch.float64: ((1 << 53) + 1, "2^53+1 for Double")}


@check(*ops_named("randperm"))
def _randperm(n, *args, dtype=None, out=None, **kwargs):
    if out is not None:
        dtype = out.dtype
    if dtype is None:
        return  # (the default, int64)
    _require(dtype, "randperm", _drawn(_real_number))
    if n > 0:
        torch.scalar_tensor(n - 1, dtype=dtype)  # eager's overflow error
    most = _RANDPERM_MAX.get(dtype)
    if most is not None and n > most[0]:
        raise RuntimeError(f"n cannot be greater than {most[1]} type.")


@check(aten.normal.float_Tensor, aten.normal.Tensor_Tensor)
def _normal_std(mean, std, *args, **kwargs):
    if std.dtype.is_complex:
        raise RuntimeError("normal expects standard deviation to be non-complex")


@check(aten.native_dropout.default)
def _native_dropout(x, p, train):
    # eager scales the kept values in place by a float, which an integer or bool tensor cannot
    # hold, at any p; an empty one is returned at once
    if train is not False and x.numel() and not _inexact(x.dtype):
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{type_name(x.dtype)}")
    if train is not False and x.numel():
        _require(x.dtype, "bernoulli_scalar_cpu_", _not_float8)


_INDEX_DTYPES = (torch.int64, torch.int32, torch.uint8, torch.bool)


@check(aten.index.Tensor)
def _index(x, indices):
    tensors = [i for i in indices if i is not None]
    if any(i.dtype not in _INDEX_DTYPES for i in tensors):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if all(i.dtype in (torch.int64, torch.int32) for i in tensors):  # (masks: shapes need the data)
        try:
            torch.broadcast_shapes(*[i.shape for i in tensors])
        except RuntimeError:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                             f"shapes {', '.join(str(list(i.shape)) for i in tensors)}") from None


@check(aten.index_put.default)
def _index_put(x, indices, values, accumulate=False):
    _index(x, indices)
    if values.dtype != x.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{type_name(x.dtype)} for the destination and {type_name(values.dtype)} "
                           "for the source.")


def _t(name):
    def fn(x):
        if x.dim() > 2:
            raise RuntimeError(f"{name}() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
    return fn


check(aten.t.default)(_t("t"))
check(aten.t_.default)(_t("t_"))


@check(*_with_inplace(["clamp.default", "clamp.Tensor"]))
def _clamp(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")


@check(aten.convolution.default)
def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if x.dtype != w.dtype or (bias is not None and bias.dtype != x.dtype):
        other = w.dtype if w.dtype != x.dtype else bias.dtype
        raise RuntimeError(f"expected scalar type {type_name(x.dtype)} but found {type_name(other)}")
    if w.shape[0] % groups:  # (eager's double brackets)
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size [{list(w.shape)}] instead")
    if transposed:
        if x.shape[1] != w.shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input"
                               f"{list(x.shape)} to have {w.shape[0]} channels, but got {x.shape[1]} "
                               "channels instead")
        out_channels = w.shape[1] * groups
        if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_channels):
            raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected bias to be "
                               f"1-dimensional with {out_channels} elements, but got bias of size "
                               f"{list(bias.shape)} instead")
        if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
            raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                               f"output_padding {list(output_padding)}, stride {list(stride)}, "
                               f"dilation {list(dilation)}")
        return
    if x.dim() == w.dim() and x.shape[1] != w.shape[1] * groups:  # (a mis-sized nn.Conv2d)
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got "
                           f"{x.shape[1]} channels instead")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w.shape[0]):
        raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional "
                           f"with {w.shape[0]} elements, but got bias of size {list(bias.shape)} instead")


def _dim_in_range(x, dim):
    n = max(x.dim(), 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")


def _dim_second(x, dim, *args, **kwargs):
    _dim_in_range(x, dim)


def _sort_dim(x, *args, **kwargs):  # (sort.stable takes its dim by keyword only)
    _dim_in_range(x, args[0] if args else kwargs.get("dim", -1))


def _dim_third(x, src, dim, *args, **kwargs):
    _dim_in_range(x, dim)


# dims that eager wraps (raising its IndexError) and PyTorch's meta kernels take unchecked: the
# program sorted or scattered along a wrapped dim
check(aten.sort.default, aten.sort.stable, aten.sort.values, aten.sort.values_stable)(_sort_dim)
check(*ops_named("index_reduce", "index_reduce_", "index_fill", "index_fill_"))(_dim_second)
check(*ops_named("select_scatter", "slice_scatter"))(_dim_third)


@check(aten.index_select.default)
def _index_select(x, dim, index):
    _dim_in_range(x, dim)
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index.dtype not in (torch.int32, torch.int64):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if x.dim() == 0 and index.numel() > 1:  # (a 0-d result took the first; compiled with grad,
        # the backward's check raised inside autograd's engine and aborted the process)
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                           f"{index.numel()} value(s)")


def _eager_scalar_checks(op, sizes=None, elements=False):
    """Eager's checks of an op's Python scalar arguments: a fill value its dtype cannot hold
    (`full(2, 300, dtype=int8)`), an empty [from, to) range, a probability outside [0, 1], a negative
    integer power. Most CPU kernels make them before returning early on an empty tensor, so the op
    runs on element-free stand-ins (with `elements`: zeros of the arguments' shapes, for a kernel
    that returns before it converts the scalar); `sizes`: the position of a size list, made all
    zeros."""
    def fn(*args, **kwargs):
        args = stand_in(args, "cpu", elements=elements)
        if sizes is not None and sizes < len(args):
            args = args[:sizes] + ([0] * len(args[sizes]),) + args[sizes + 1:]
        op(*args, **{k: stand_in(v, "cpu", elements=elements) for k, v in kwargs.items()})
    return fn


# Random ops: their float arguments are part of the signature, so checking once per signature
# checks every value.
for _op in _with_inplace(("uniform.default", "random.default", "random.to", "random.from",
                          "bernoulli.p", "exponential.default", "geometric.default",
                          "log_normal.default", "cauchy.default")):
    check(_op)(_eager_scalar_checks(_op))
check(aten.normal.float_float)(_eager_scalar_checks(aten.normal.float_float, sizes=2))
# randint's bounds: in order, and within the dtype (`randint(3, 9, dtype=torch.bool)`); a complex
# dtype has none
for _op, _sizes in ((aten.randint.default, 1), (aten.randint.generator, 1), (aten.randint.low, 2),
                    (aten.randint.low_generator, 2), (aten.randint_like.default, None),
                    (aten.randint_like.low_dtype, None)):
    check(_op)(_eager_scalar_checks(_op, sizes=_sizes))


@check(*ops_named("index_fill", "index_fill_"))
def _index_fill(x, dim, index, value, **kwargs):
    if index.dtype != torch.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    complex_value = value.is_complex() if isinstance(value, torch.Tensor) else type(value) is complex
    if complex_value and not x.is_complex():
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is not "
                           "supported")


@check(*_with_inplace(["mvlgamma.default"]))
def _mvlgamma(x, p):
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")


@check(aten.cat.out)
def _cat_out(tensors, dim=0, *, out):
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors], tensors[0].dtype) \
        if tensors else out.dtype
    if not torch.can_cast(dtype, out.dtype):  # (the meta kernel's is a RuntimeError)
        raise TypeError(f"torch.cat(): input types can't be cast to the desired output type "
                        f"{type_name(out.dtype)}")


@check(aten.isnan.out)
def _isnan_out(x, *, out):
    if out.dtype != torch.bool:
        raise RuntimeError(f"Expected out tensor to have dtype bool, but got {cpp_type_name(out.dtype)} instead")


@check(aten.linalg_cross.default)
def _cross(x, y, dim=-1):
    if x.dtype != y.dtype:  # (XLA would promote)
        raise RuntimeError(f"expected scalar type {type_name(x.dtype)} but found {type_name(y.dtype)}")


def _class_target(target):
    if target.dtype not in (torch.int64, torch.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {type_name(target.dtype)}")


@check(aten.nll_loss_forward.default)
def _nll_loss(x, target, weight, reduction, ignore_index):
    if target.dim() > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if not 0 < x.dim() <= 2:
        raise RuntimeError("input tensor should be 1D or 2D")
    if not (x.dim() == 1 and target.dim() == 0) and (target.dim() == 0 or x.shape[0] != target.shape[0]):
        raise RuntimeError(f"size mismatch (got input: {list(x.shape)}, target: {list(target.shape)})")
    if weight is not None and (weight.dim() != 1 or weight.numel() != x.shape[-1]):
        raise RuntimeError(f"weight tensor should be defined either for all {x.shape[-1]} classes or "
                           f"no classes but got weight tensor of shape: {list(weight.shape)}")
    _class_target(target)


@check(aten.nll_loss2d_forward.default)
def _nll_loss2d(x, target, weight, reduction, ignore_index):
    if target.dim() != 3:
        raise RuntimeError("only batches of spatial targets supported (3D tensors) but got targets of "
                           f"dimension: {target.dim()}")
    if x.dim() != 4:
        raise RuntimeError("only batches of spatial inputs supported (4D tensors), but got input of "
                           f"dimension: {x.dim()}")
    if weight is not None and weight.numel() != x.shape[1]:
        raise RuntimeError("weight tensor should be defined either for all or no classes")
    if (x.shape[0], x.shape[2], x.shape[3]) != tuple(target.shape):
        raise RuntimeError(f"size mismatch (got input: {list(x.shape)} , target: {list(target.shape)}")
    _class_target(target)
    if target.dtype == torch.uint8:  # (the 2d kernel, unlike the 1d one, takes Long only)
        raise RuntimeError("expected scalar type Long but found Byte")


@check(aten.smooth_l1_loss.default)
def _smooth_l1_loss(x, target, reduction=1, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")


@check(aten.multinomial.default)
def _multinomial(probs, num_samples, replacement=False, *, generator=None):
    if not 1 <= probs.dim() <= 2:
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not probs.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{type_name(probs.dtype)}")
    _require(probs.dtype, "aminmax_cpu", _not_float8)
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > probs.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")


def _range_ends(op):
    """Eager converts start and end to the dtype, raising on overflow, once there are elements
    (logspace: more than one): its kernel on at most 3 elements on the CPU makes the same checks."""
    def fn(start, end, steps, *args, **kwargs):
        kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "pin_memory")}
        op(start, end, min(steps, 3), *args, device="cpu", **kwargs)
    return fn


for _op in (aten.linspace.default, aten.logspace.default):
    check(_op)(_range_ends(_op))


@check(*ops_named("heaviside"))
def _heaviside(x, values, *args, **kwargs):
    if x.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")


@check(aten.complex.default, aten.polar.default)
def _complex_parts(a, b):
    """A complex tensor from two real ones: half, float or double, both the same (the meta kernel
    promotes them, and makes complex64 of two bfloat16 tensors)."""
    real = (torch.float16, torch.float32, torch.float64)
    if a.dtype not in real or b.dtype not in real:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{type_name(a.dtype)} and {type_name(b.dtype)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"Expected object of scalar type {type_name(a.dtype)} but got scalar "
                           f"type {type_name(b.dtype)} for second argument")




@check(*ops_named("index_copy", "index_copy_"))
def _index_copy_dtypes(x, dim, index, source):
    _long_index("index_copy_", index)
    if x.dtype != source.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but "
                           f"got (self) {type_name(x.dtype)} and (source) {type_name(source.dtype)}")


@check(*ops_named("put", "put_"))
def _put_dtypes(x, index, source, accumulate=False):
    _long_index("put_", index)
    if x.dtype != source.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {type_name(x.dtype)} and source.dtype = "
                           f"{type_name(source.dtype)}")


@check(aten._weight_norm_interface.default)
def _weight_norm(v, g, dim=0):
    if dim not in (0, v.dim() - 1):  # (torch._weight_norm takes other dims apart, unfused)
        raise RuntimeError("fused kernels can only be applied for first or last dim")
    if v.dtype != g.dtype:  # (the CPU kernel reads g as v's dtype)
        raise RuntimeError(f"expected scalar type {type_name(v.dtype)} but found {type_name(g.dtype)}")


@check(aten.histc.default)
def _histc(x, bins=100, min=0, max=0):
    # (before the meta kernel, which words "max must be larger than min" otherwise)
    if not (math.isfinite(min) and math.isfinite(max)):
        raise RuntimeError(f"torch.histc: range of [{min:g}, {max:g}] is not finite")
    if (int(min) > int(max)) if not (x.is_floating_point() or x.is_complex()) else min > max:
        # (an integer input's range is truncated to its dtype first, as CUDA's kernel does)
        raise RuntimeError("torch.histc: max must be larger than min")


def _long_index(name, index):
    if index.dtype != torch.int64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {type_name(index.dtype)}")


_SEGMENT_REDUCTIONS = ("sum", "prod", "mean", "max", "min", "amax", "amin")


@check(aten.segment_reduce.default)
def _segment_reduce(data, reduce, lengths=None, indices=None, offsets=None, axis=0, **kwargs):
    # (eager checks the lengths' values before the dtypes; lazyxla checks values at the next read)
    if reduce not in _SEGMENT_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    for name, t in (("lengths", lengths), ("offsets", offsets)):
        if t is not None:
            if data.dim() < t.dim():
                raise RuntimeError(f"Expected data.dim() >= {name}_value.dim() to be true, but got "
                                   "false.")
            _require(t.dtype, f"_segment_reduce_{name}_cpu_kernel1",
                     lambda dt: dt in (torch.int32, torch.int64))
    _require(data.dtype, "_segment_reduce_cpu", _floating_only)


def _tri_indices(name):
    def fn(row, col, offset=0, *, dtype=None, **kwargs):
        """eager's kernel takes int32 and int64 only; PyTorch's meta kernel words the error
        otherwise (a RuntimeError naming 'torch.bool')."""
        _require(dtype or torch.int64, name, lambda d: d in (torch.int32, torch.int64))
    return fn


check(aten.tril_indices.default)(_tri_indices("tril_indices"))
check(aten.triu_indices.default)(_tri_indices("triu_indices"))


@check(*ops_named("arange"))
def _arange(*args, dtype=None, out=None, **kwargs):
    """eager's kernel has no bool or complex ranges; the meta kernel and XLA make them. With
    `out=` (fftfreq, the window functions) the range takes out's dtype."""
    dtype = out.dtype if out is not None else dtype
    if dtype is not None:
        _require(dtype, "arange_cpu", lambda d: d is not torch.bool and not d.is_complex)

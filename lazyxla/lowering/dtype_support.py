"""Dtypes eager's CPU kernels do not implement raise eager's error at the call.

Meta kernels infer shapes for any dtype, and XLA computes with most: `complex < 1`, `sort` or
`maximum` of complex tensors, `abs`/`mm`/`conv` of bools, `gelu` or `floor` of integers, `bool -
float` all gave results where eager raises ("not implemented for 'ComplexFloat'", "Subtraction
... with a bool tensor is not supported"); bitwise ops, shifts and gcd of floats failed only when
the program compiled; `uint16 + int64` wrapped around in uint16 where eager refuses to promote
(uint16/32/64 and float8 with another dtype). Once per signature (ir/meta.py: SIGNATURE_CHECKS;
for a decomposed op, meta.check_signature), a call runs eager's CPU kernel on zero stand-ins of its arguments, and an
error of dtype support is raised as eager raised it. Other errors of the stand-ins (their shapes,
their values) are not the call's and are ignored. Elementwise ops, reductions, sorts, matrix
products and _foreach ops run on one-element stand-ins. Ops whose kernels need their shapes to agree
(convolutions, pools, norms, losses, grid_sample, topk) run on zeros of the call's own shapes, when
their input is complex, bool or integer and the call is small. Other ops never run: their kernels
may trust values to agree with shapes. Half and bfloat16 stay allowed where eager's CPU kernels
lack only them (accelerators compute them; the probe runs again in float32 to tell), and random
ops are never run (they would draw from the CPU generator).
"""
from __future__ import annotations

import re
import warnings

import torch
from torch.utils._pytree import tree_leaves, tree_map_only

from lazyxla.ir.meta import SIGNATURE_CHECKS
from .registry import LOWERINGS, VIEWS

# RuntimeErrors some CPU kernels raise for a dtype they lack (NotImplementedErrors name it too)
_DTYPE_ERRORS = re.compile(
    r"not (yet )?implemented for complex|does not support (complex|bool)|not supported for "
    r"complex|inputs not supported for|with (a|two) bool tensors? is not supported|Expected both "
    r"inputs to be Half, Float or Double tensors but got (?!Half|BFloat16|Float|Double)|Integer "
    r"division with addcdiv is no longer supported|to be non-complex|result type \w+ can't be "
    r"cast to the desired output type|cannot be converted to type \w+ without overflow|"
    r"^Promotion for (uint16, uint32, uint64 types|Float8 Types) is not supported")
# Dtypes a kernel needs to agree: an out= tensor of a dtype it does not write (the meta kernels
# cast to any), lerp's and heaviside's inputs. Always eager's error, half dtypes included.
_DTYPES_DISAGREE = re.compile(
    r"^Found dtype \w+ but expected \w+|dtype of out: \w+ should be same as input|Expected out "
    r"tensor to have dtype|Expected the dtype for input and out to match|heaviside is not yet "
    r"implemented for tensors with different dtypes|^expected dtype [\w: ]+ for `\w+` but got dtype")
# an op may lack these on the CPU only: lazyxla keeps computing them
_ALLOWED = re.compile(r"'(Half|BFloat16|Float8\w*)'|\b(Half|BFloat16)\b")
# integer inputs the CPU's kernels lack and CUDA's compute, which libraries pick on any device but
# the CPU: Hugging Face's MoE layers count tokens per expert with an int32 histc off the CPU
_ACCELERATOR_INTEGER_OPS = frozenset(("histc",))
_RANDOM = re.compile(r"rand|bernoulli|normal|dropout|multinomial|exponential|geometric|cauchy|"
                     r"uniform|poisson|rrelu")
_RUNS: dict = {}  # op -> how its CPU kernel may be run on stand-ins: _ONE, _SHAPED or None
_ONE, _SHAPED = "one element", "shaped"


# Ops whose CPU kernels are safe on any one-element stand-ins: elementwise and reduction ops
# (PyTorch's tags) and these.
_SAFE = frozenset(("sort", "argsort", "msort", "median", "nanmedian", "mode", "cummax", "cummin",
                   "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "dot", "vdot",
                   "trace", "_softmax", "_log_softmax", "floor_divide", "complex", "polar", "rsub",
                   "_addmm_activation", "_weight_norm_interface", "cat"))
# Ops whose kernels need their arguments' shapes to agree (a kernel size, k, a target per row)
# run on zeros of the call's own shapes, and only for a complex, bool or integer input (their
# first tensor: an integer target or index is theirs by design), result dtype, or any complex
# tensor. Zeros are valid indices and targets. Named one by one: other kernels may trust values
# to agree with shapes (ctc_loss's backward reads memory by its lengths, and crashed the process
# on stand-ins).
_SHAPED_OPS = frozenset((
    "convolution", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "_batch_norm_with_update", "native_group_norm",
    "native_layer_norm", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "avg_pool2d", "avg_pool3d", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "max_pool2d_with_indices_backward", "max_unpool2d", "max_unpool3d",
    "fractional_max_pool2d", "fractional_max_pool3d", "reflection_pad1d", "reflection_pad2d",
    "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "im2col",
    "col2im", "glu", "_prelu_kernel", "hardswish", "log_sigmoid_forward", "grid_sampler_2d",
    "grid_sampler_3d", "mse_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "nll_loss_forward",
    "nll_loss2d_forward", "multi_margin_loss", "multilabel_margin_loss_forward", "index_reduce",
    "scatter_reduce", "histc", "bucketize", "searchsorted", "topk", "kthvalue",
    "cumsum", "cumprod", "logcumsumexp", "signbit", "linalg_cross", "linalg_lu",
    "linalg_lu_factor_ex", "triangular_solve", "linalg_solve_triangular"))
# functional forms without a CPU kernel: probed as the op they stand for (its writes go to the
# stand-ins)
_PROBED_AS = {torch.ops.aten._native_batch_norm_legit_functional.default:
              torch.ops.aten._native_batch_norm_legit.default}
# a shaped probe allocates the call's tensors on the CPU: larger calls are not probed
_SHAPED_LIMIT = 1 << 20
_TAGS = (torch.Tag.pointwise, torch.Tag.reduction)


def _how(op):
    how = _RUNS.get(op, False)
    if how is False:
        schema = getattr(op, "_schema", None)
        ns, name = schema.name.split("::") if schema is not None else ("", "")
        low = LOWERINGS.get(op)
        name = _PROBED_AS[op].__name__.split(".")[0] if op in _PROBED_AS else name.rstrip("_")
        runnable = (ns == "aten" and op not in VIEWS and not (low is not None and low.random)
                    and not _RANDOM.search(name)
                    and not any("Generator" in str(a.type) for a in schema.arguments))
        how = _RUNS[op] = None if not runnable else (
            _SHAPED if name in _SHAPED_OPS else
            _ONE if name in _SAFE or name.startswith("_foreach_") or any(t in op.tags for t in _TAGS)
            else None)
    return how


_HALVES = (torch.float16, torch.bfloat16)


def _stand_ins(tree, shaped, halves_as=None):
    """The call's arguments for the CPU: zeros of one element or of each tensor's shape (half and
    bfloat16 ones as `halves_as` where given), devices on the CPU."""
    def tensor(t):
        dtype = halves_as if halves_as is not None and t.dtype in _HALVES else t.dtype
        return torch.zeros(t.shape if shaped else (1,) * t.dim(), dtype=dtype)
    tree = tree_map_only(torch.Tensor, tensor, tree)
    return tree_map_only(torch.device, lambda d: torch.device("cpu") if d.type == "lazyxla" else d,
                         tree)


_NOT_DTYPE, _DTYPE, _HALF = 0, 1, 2  # what a stand-in's error says of the call's dtypes


def _dtype_error(e: Exception) -> int:
    message = str(e)
    if _DTYPES_DISAGREE.search(message):
        return _DTYPE
    if isinstance(e, NotImplementedError):  # (not "Could not run ... on the 'CPU' backend")
        dtype_error = ("not implemented for '" in message or "supported for complex" in message
                       or "implemented for complex" in message
                       or "intended to support complex" in message)
    else:
        dtype_error = bool(_DTYPE_ERRORS.search(message))
    offending = message.split("but got")[-1]  # the dtypes the call gave, where the message says
    return _NOT_DTYPE if not dtype_error else _HALF if _ALLOWED.search(offending) else _DTYPE


def _run(op, args, kwargs, shaped, halves_as=None) -> int:
    cpu_args, cpu_kwargs = _stand_ins((args, kwargs), shaped, halves_as)
    try:
        _quietly(_PROBED_AS.get(op, op), cpu_args, cpu_kwargs)
    except (NotImplementedError, RuntimeError) as e:
        kind = _dtype_error(e)
        if kind == _DTYPE or (kind == _HALF and halves_as is None
                              and _fails_in_float32(op, args, kwargs, shaped)):
            # (a half-only gap of the CPU's is allowed; one float32 shares is eager's error, in
            # eager's words for the half dtypes)
            raise type(e)(message_line(e)) from None
        return kind
    except Exception:  # noqa: BLE001 - an error of the stand-ins, not of the call's dtypes
        pass
    return _NOT_DTYPE


def _quietly(fn, args, kwargs) -> None:
    """fn(*args, **kwargs) with its warnings dropped: the call itself warns as eager does, once.
    A C++ kernel's warning (std's "degrees of freedom is <= 0" on a one-element stand-in) reaches
    Python only where a torch function returns to Python, and an OpOverload call is none: it
    would surface at the end of the user's own call. Tensor.apply_ is such a function that calls
    back into Python, so it delivers them here, inside the filter."""
    def call(v):
        fn(*args, **kwargs)
        return v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.zeros(1).apply_(call)


def _fails_in_float32(op, args, kwargs, shaped) -> bool:
    try:
        return _run(op, args, kwargs, shaped, torch.float32) != _NOT_DTYPE
    except (NotImplementedError, RuntimeError):
        return True


def check_dtype_support(op, args, kwargs) -> None:
    how = _how(op)
    if how is None:
        return
    tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if not tensors:
        return
    if how is _SHAPED:
        if (op._schema.name.split("::")[1] in _ACCELERATOR_INTEGER_OPS
                and not tensors[0].dtype.is_floating_point and not tensors[0].is_complex()
                and tensors[0].dtype != torch.bool):
            return
        dtype = kwargs.get("dtype")  # (cumsum's: a float input summed into bools)
        real = (tensors[0].dtype.is_floating_point and (dtype is None or dtype.is_floating_point)
                and not any(t.is_complex() for t in tensors))  # (an mse_loss complex target)
        if real or sum(t.numel() for t in tensors) > _SHAPED_LIMIT:
            return
    _run(op, args, kwargs, how is _SHAPED)


def message_line(e: Exception) -> str:
    """Eager's message without the C++ source location PyTorch appends on later lines."""
    return str(e).split("\n")[0]


SIGNATURE_CHECKS.append(check_dtype_support)

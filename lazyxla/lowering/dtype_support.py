"""Dtypes eager's CPU kernels do not implement raise eager's error at the call.

Meta kernels infer shapes for any dtype, and XLA computes with most: `complex < 1`, `sort` or
`maximum` of complex tensors, `abs`/`mm`/`conv` of bools, `gelu` or `floor` of integers, `bool -
float` all gave results where eager raises ("not implemented for 'ComplexFloat'", "Subtraction
... with a bool tensor is not supported"). Once per signature (ir/meta.py: SIGNATURE_CHECKS), a
call with a complex, bool or integer tensor runs eager's CPU kernel on one-element zero stand-ins
of its arguments, and an error of dtype support is raised as eager raised it. Other errors of the
stand-ins (their shapes, their values) are not the call's and are ignored. Only ops whose kernels
cannot be hurt by stand-ins run: elementwise ops, reductions, sorts and matrix products. Half and bfloat16 stay
allowed where eager's CPU kernels lack them (accelerators compute them), and random ops are never
run (they would draw from the CPU generator).
"""
from __future__ import annotations

import re
import warnings

import torch

from lazyxla.ir.meta import SIGNATURE_CHECKS
from .registry import LOWERINGS, VIEWS

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# RuntimeErrors some CPU kernels raise for a dtype they lack (NotImplementedErrors name it too)
_DTYPE_ERRORS = re.compile(
    r"not (yet )?implemented for complex|does not support (complex|bool)|not supported for "
    r"complex|inputs not supported for|with (a|two) bool tensors? is not supported|Expected both "
    r"inputs to be Half, Float or Double tensors but got (?!Half|BFloat16|Float|Double)|Integer "
    r"division with addcdiv is no longer supported|to be non-complex")
# an op may lack these on the CPU only: lazyxla keeps computing them
_ALLOWED = re.compile(r"'(Half|BFloat16|Float8\w*)'|\b(Half|BFloat16)\b")
_RANDOM = re.compile(r"rand|bernoulli|normal|dropout|multinomial|exponential|geometric|cauchy|"
                     r"uniform|poisson|rrelu")
_RUNS: dict = {}  # op -> whether its CPU kernel may be run on stand-ins


# Ops whose CPU kernels are safe on any one-element stand-ins: elementwise and reduction ops
# (PyTorch's tags) and these. Others may trust their arguments to agree (ctc_loss's backward
# reads memory by its lengths, and crashed the process on stand-ins).
_SAFE = frozenset(("sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode",
                   "cummax", "cummin", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv",
                   "dot", "vdot", "trace", "_softmax", "_log_softmax"))
_TAGS = (torch.Tag.pointwise, torch.Tag.reduction)


def _runnable(op) -> bool:
    ok = _RUNS.get(op)
    if ok is None:
        schema = getattr(op, "_schema", None)
        ns, name = schema.name.split("::") if schema is not None else ("", "")
        low = LOWERINGS.get(op)
        ok = _RUNS[op] = (ns == "aten" and op not in VIEWS and not (low is not None and low.random)
                          and (name.rstrip("_") in _SAFE or any(t in op.tags for t in _TAGS))
                          and not _RANDOM.search(name)
                          and not any("Generator" in str(a.type) for a in schema.arguments))
    return ok


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)


def _one_element(x):
    if isinstance(x, torch.Tensor):
        return torch.zeros((1,) * x.dim(), dtype=x.dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_one_element(v) for v in x)
    if isinstance(x, torch.device) and x.type == "lazyxla":
        return torch.device("cpu")
    return x


def _is_dtype_error(e: Exception) -> bool:
    message = str(e)
    if isinstance(e, NotImplementedError):  # (not "Could not run ... on the 'CPU' backend")
        dtype_error = ("not implemented for '" in message or "supported for complex" in message
                       or "intended to support complex" in message)
    else:
        dtype_error = bool(_DTYPE_ERRORS.search(message))
    offending = message.split("but got")[-1]  # the dtypes the call gave, where the message says
    return dtype_error and not _ALLOWED.search(offending)


def check_dtype_support(op, args, kwargs) -> None:
    tensors = list(_tensors(list(args) + list(kwargs.values())))
    if not any(t.dtype not in _FLOATS for t in tensors) or not _runnable(op):
        return
    try:
        with warnings.catch_warnings():  # the call itself warns as eager does, once
            warnings.simplefilter("ignore")
            op(*_one_element(args), **{k: _one_element(v) for k, v in kwargs.items()})
    except (NotImplementedError, RuntimeError) as e:
        if _is_dtype_error(e):
            raise type(e)(message_line(e)) from None
    except Exception:  # noqa: BLE001 - an error of the stand-ins, not of the call's dtypes
        pass


def message_line(e: Exception) -> str:
    """Eager's message without the C++ source location PyTorch appends on later lines."""
    return str(e).split("\n")[0]


SIGNATURE_CHECKS.append(check_dtype_support)

"""Ops with no lowering: PyTorch's decomposition when one exists, else the CPU fallback.

The CPU fallback materialises the inputs, runs PyTorch's CPU kernel, and returns device data; it
counts `aten::<op>` and remembers the user's source line, so it is never silent."""
from __future__ import annotations

import os
import threading
import traceback

import torch

from lazyxla import metrics
from lazyxla.ir import buffer as buf
from lazyxla.ir import meta
from lazyxla.ir.node import DATA, data_node
from lazyxla.jaxenv import relayout, supports_dtype, to_device, to_host
from lazyxla.runtime import executor
from . import dispatch
from .decompositions import DECOMPOSITIONS

_PKG_DIRS = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(torch.__file__))
_active = threading.local()


def user_site() -> str | None:
    """file:line of the innermost frame outside torch and lazyxla (the model code)."""
    for fr in reversed(traceback.extract_stack()):
        if not fr.filename.startswith(_PKG_DIRS) and "<frozen" not in fr.filename:
            return f"{fr.filename}:{fr.lineno}"
    return None


def lazy_tensors(tree, acc):
    """The lazyxla tensors in a tree of lists, tuples and dicts, appended to `acc`."""
    if isinstance(tree, torch.Tensor):
        if tree.device.type == "lazyxla":
            acc.append(tree)
    elif isinstance(tree, (list, tuple)):
        for x in tree:
            lazy_tensors(x, acc)
    elif isinstance(tree, dict):
        for x in tree.values():
            lazy_tensors(x, acc)
    return acc


def materialize(tensors) -> None:
    """Execute whatever is pending below `tensors` (one program)."""
    roots = {id(buf.state_of(t).root): buf.state_of(t).root for t in tensors}
    executor.sync_isolating(list(roots.values()))


def device_value(t: torch.Tensor):
    """The jax array of a lazyxla tensor's current value (executed if pending). It may be shared
    with other tensors: never hand it out where it could be written."""
    st = buf.state_of(t)
    if st.root is st:
        node = st.read()
        while node.op is not DATA:  # (another thread may record a write while this one runs:
            materialize([t])        # read again, and run that too, rather than read it pending)
            node = st.read()
        return relayout(node.data, node.perm, None)
    tmp = buf.Buffer(st.read())  # a view: its root and the view's own value in one program
    executor.sync_isolating([st.root, tmp])
    return tmp.node.data  # (a program's result: as the value)


def to_cpu(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy of a lazyxla tensor's current value."""
    if dispatch.tracing_here():
        raise FallbackInTrace("lazyxla: a traced graph reads a device value into Python (.item(), "
                              ".cpu()); a program cannot hold that read")
    value = device_value(t)
    with metrics.timed("TransferFromDeviceTime"):
        return to_host(value)


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor of t's value to run an op on: resizable (as out= may need), with t's strides
    where they permute its dims, so the CPU kernel gives its result eager's layout."""
    layout = meta.dense_layout(t)
    if layout is None:
        return to_cpu(t).clone()
    return torch.empty_strided(t.shape, layout, dtype=t.dtype).copy_(to_cpu(t))


def from_cpu(t: torch.Tensor) -> torch.Tensor:
    """A new lazyxla tensor holding a copy of CPU tensor `t`, with its strides where they are a
    permutation of its dims (as eager's `.to(device)` keeps them)."""
    if not supports_dtype(t.dtype):  # (numpy's conversion said "Got unsupported ScalarType")
        raise TypeError(f"lazyxla does not support dtype {t.dtype}; keep such tensors on the CPU")
    with metrics.timed("TransferToDeviceTime"):
        return buf.wrap_node(data_node(to_device(t), t.dtype), meta.dense_layout(t))


def _map(tree, fn):
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map(x, fn) for x in tree)
    return tree


class FallbackInTrace(RuntimeError):
    """An op reached the CPU fallback, or read a device value, while the dynamo bridge traced a
    graph: the program would replay this call's CPU result as a constant. Raised before anything
    runs; the backend then splits the graph around the op."""


def cpu_fallback(op, args, kwargs):
    name = op._schema.name.split("::")[-1] + ("" if op._overloadname == "default" else f".{op._overloadname}")
    if dispatch.tracing_here():
        raise FallbackInTrace(f"lazyxla: {name} runs on the CPU for these arguments; a traced "
                              "program cannot hold it")
    metrics.record_fallback(name, user_site())
    lazy = lazy_tensors((args, kwargs), [])
    for t in lazy:
        if not supports_dtype(t.dtype):
            raise TypeError(f"lazyxla: dtype {t.dtype} is not supported ({op})")
    if op._schema.is_mutable:
        from .overlap import check_call  # (overlap.py reads argument trees with lazy_tensors)
        check_call(op, args, kwargs)
    materialize(lazy)
    host = {id(t): _host_copy(t) for t in lazy}
    to_host_arg = lambda x: host.get(id(x), x) if isinstance(x, torch.Tensor) else x  # noqa: E731

    def devkw(v):
        return torch.device("cpu") if isinstance(v, torch.device) and v.type == "lazyxla" else v

    cargs = _map(args, to_host_arg)
    ckw = {k: devkw(_map(v, to_host_arg)) for k, v in kwargs.items()}
    out = op(*cargs, **ckw)
    if any(o.is_nested for o in _flat(out)):
        raise nested_error(name)
    layouts = {o.layout for o in _flat(out)} - {torch.strided}
    if layouts:
        raise sparse_error(name, layouts)
    # Mutated arguments: copy the CPU result back into the device tensors they came from.
    back = {}
    for t in lazy:
        h = host[id(t)]
        if h._version != 0 or any(h is o for o in _flat(out)):
            from .dispatch import write_resizing
            write_resizing(t, buf.state_of(from_cpu(h)).read())
            back[id(h)] = t

    def result(x):
        if id(x) in back:
            return back[id(x)]
        if x.device.type != "cpu":
            return x
        if not supports_dtype(x.dtype):  # (a quantized result: not a lazyxla tensor, nor a CPU one)
            raise RuntimeError(f"lazyxla: {name} makes a tensor of dtype {x.dtype}, which "
                               "lazyxla does not support; keep such work on the CPU (t.cpu())")
        return from_cpu(x)
    return _map(out, result)


def nested_error(name) -> NotImplementedError:
    return NotImplementedError(
        f"lazyxla: {name} makes a nested tensor; lazyxla has no nested tensors. "
        "nn.TransformerEncoder takes this path in eval mode with a src_key_padding_mask: "
        "construct it with enable_nested_tensor=False.")


def _refuse_nested(*args, **kwargs):
    raise nested_error("nested_tensor")


def sparse_error(name, layouts) -> NotImplementedError:
    return NotImplementedError(
        f"lazyxla: {name} makes a {'/'.join(sorted(map(str, layouts)))} tensor; lazyxla has "
        "dense (strided) tensors only, as PyTorch gives a Python-registered device no sparse "
        "layouts. Keep sparse work on the CPU (t.cpu().to_sparse()).")


def _refuse_sparse(name, layout_of):
    def refuse(*args, **kwargs):
        raise sparse_error(name, {layout_of(kwargs)})
    return refuse


# What making a sparse or nested tensor on the device (`torch.sparse_csr_tensor(..., device=...)`,
# `torch.nested.nested_tensor` of device tensors) or moving one there (`.to("lazyxla")`) reaches,
# at the device's sparse and nested dispatch keys: a compressed or nested tensor was made,
# holding device tensors, and every op on it then failed ("Could not run ... 'SparseCsrlazyxla'
# backend"), or the move failed so.
REFUSED_CONSTRUCTORS = {
    ("_sparse_compressed_tensor_unsafe", "SparseCsrPrivateUse1"):
        _refuse_sparse("_sparse_compressed_tensor_unsafe", lambda kw: kw.get("layout")),
    ("_sparse_coo_tensor_with_dims_and_tensors", "SparsePrivateUse1"):
        _refuse_sparse("_sparse_coo_tensor_with_dims_and_tensors", lambda kw: torch.sparse_coo),
    ("_nested_tensor_from_tensor_list", "PrivateUse1"): _refuse_nested,
    ("_to_copy", "NestedTensorPrivateUse1"): _refuse_nested,
}


def _flat(tree):
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [y for x in tree for y in _flat(x)]
    return []


def decompose(op, args, kwargs):
    """Run PyTorch's decomposition of `op` (its parts dispatch back here); None if there is none
    or `op` is already being decomposed further up the stack."""
    from torch._decomp import decomposition_table
    fn = DECOMPOSITIONS.get(op) or decomposition_table.get(op)
    if fn is None:
        return NotImplemented
    active = getattr(_active, "ops", None)
    if active is None:
        active = _active.ops = set()
    if op in active:
        return NotImplemented
    meta.check_signature(op, args, kwargs)  # eager's dtype errors (floor_divide of complex)
    active.add(op)
    try:
        metrics.counter_inc(f"lazyxla::decomposed::{op}")
        return fn(*args, **kwargs)
    finally:
        active.discard(op)

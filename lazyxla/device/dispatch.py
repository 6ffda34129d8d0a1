"""Recording: the PrivateUse1 kernels that turn an aten call into IR instead of executing it.

Per call: walk the arguments once, collecting input nodes, the attrs template (tensors and runtime
scalars replaced by slots) and the shape-inference signature; look the output shape/dtype up in the
meta cache; make the node and the output tensors. In-place and out= overloads record their
functional op and write the result into the mutated tensors; view ops record a view chain.
"""
from __future__ import annotations

import itertools
import threading
import warnings

import torch

from lazyxla import envflags
from lazyxla.ir import buffer as buf
from lazyxla.ir import meta
from lazyxla.ir.buffer import Buffer, View, new_tensor, state_of
from lazyxla.ir.node import Node, Slot, scalar_node
from lazyxla.lowering.registry import LOWERINGS, VIEWS, Lowering, is_scalar_type
from . import rng

_LAZY = "lazyxla"
# lazyxla:0, the one device ("privateuseone" parses before and after the rename): `t.device ==
# LAZYXLA_DEVICE` costs a quarter of `t.device.type == "lazyxla"`, which looks the name up
LAZYXLA_DEVICE = torch.device("privateuseone", 0)


# Ops that take index tensors on the CPU with a lazyxla tensor, as CUDA's do (`x[cpu_index]`,
# `x[cpu_index] = v`): the position of the index list. The indices move to the device per call.
_CPU_INDICES = {torch.ops.aten.index.Tensor: 1, torch.ops.aten.index_put.default: 1,
                torch.ops.aten.index_put_.default: 1, torch.ops.aten._index_put_impl_.default: 1,
                torch.ops.aten._index_put_impl.default: 1}


_UIDS = itertools.count()


class _OpInfo:
    """Per-overload facts computed once: which arguments are runtime scalars. `uid` stands for the
    op in signatures (an OpOverload hashes in Python, a dict lookup of a small int does not)."""
    __slots__ = ("scalar_pos", "scalar_kw", "returns_list", "like", "uid", "cpu_indices",
                 "value_check")

    def __init__(self, op):
        self.uid = next(_UIDS)
        self.cpu_indices = _CPU_INDICES.get(op)
        self.value_check = meta.VALUE_CHECKS.get(op)
        # Scalar arguments, and Python numbers passed where the schema takes a Tensor (PyTorch's
        # "wrapped numbers", as in `x * 0.5` -> mul.Tensor), are runtime values.
        args = op._schema.arguments
        low = LOWERINGS.get(op)
        static = low is not None and low.static  # shape-determining scalars (arange, linspace)
        named = low.runtime if low is not None else ()
        runtime = [not static and (is_scalar_type(a.type) or str(a.type) in ("Tensor", "Optional[Tensor]")
                                   or a.name in named) for a in args]
        self.scalar_pos = frozenset(i for i, a in enumerate(args) if not a.kwarg_only and runtime[i])
        self.scalar_kw = frozenset(a.name for a, r in zip(args, runtime) if r)
        self.like = low is not None and low.like
        rets = op._schema.returns
        self.returns_list = bool(rets) and str(rets[0].type).endswith("[]")


_INFO: dict = {}


def op_info(op) -> _OpInfo:
    info = _INFO.get(op)
    if info is None:
        info = _INFO[op] = _OpInfo(op)
    return info


def device_mismatch(t: torch.Tensor) -> RuntimeError:
    return RuntimeError("Expected all tensors to be on the same device, but found at least two "
                        f"devices, lazyxla:0 and {t.device}!")


def math_bits(node, conj, neg):
    """`node` with a tensor's lazy conj/neg bits applied: PyTorch keeps them on the tensor, and
    its Conjugate/Negative fallbacks rely on clone/copy_ (and so every read) to resolve them."""
    for flag, low in ((conj, _CONJ), (neg, _NEG)):
        if flag:
            node = Node(low, (node,), ((_S0,), ()), node.shape, node.dtype, key=())
    return node


_CONJ = Lowering("resolve_conj", lambda x: x.conj())
_NEG = Lowering("resolve_neg", lambda x: -x)


def check_device_index(device: torch.device) -> None:
    """One device: lazyxla:1 is an error, not lazyxla:0."""
    if device.index not in (None, 0):
        raise RuntimeError(f"lazyxla: invalid device index {device.index}: lazyxla has one device, "
                           "lazyxla:0")


def is_cpu_scalar(t: torch.Tensor) -> bool:
    """A 0-dim CPU tensor: PyTorch mixes these with any device; a program reads its value as a
    runtime scalar (an optimizer's step count, a bias correction)."""
    return t.dim() == 0 and t.is_cpu


# While the dynamo bridge traces a graph: id(scalar node) -> (node, the CPU 0-dim tensor it was
# read from), so that a graph input of that kind is fed its current value on every replay.
CPU_SCALAR_SOURCES: dict | None = None
TRACER: int | None = None  # the thread that traces (the trace's state is none of another's)
_thread = threading.get_ident


def tracing_here() -> bool:
    """Whether the calling thread is tracing a graph for the dynamo bridge."""
    return CPU_SCALAR_SOURCES is not None and TRACER == _thread()


def cpu_scalar_node(t: torch.Tensor) -> Node:
    """The runtime scalar that 0-dim CPU tensor `t` feeds a program: during a bridge trace it is
    tied to `t`, so that a replay reads t's value then, never the value it had when traced."""
    node = scalar_node(t.item(), t.dtype)
    if tracing_here():
        CPU_SCALAR_SOURCES[id(node)] = (node, t)  # holding node: its id stays unique
    return node


class FedNumber:
    """Where a value check's call (SourcedNumbers.checks), or a view's arguments, took the k-th
    fed number. Equal by k: two traces' recipes that take the same numbers compare equal."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return type(other) is FedNumber and other.k == self.k

    def __hash__(self):
        return hash((FedNumber, self.k))

    def __repr__(self):
        return f"FedNumber({self.k})"


class SourcedNumbers(dict):
    """(type, value) -> the index of the fed number it stands for. `checks`: the value checks that
    took one, as (check, args, kwargs) with FedNumber in its places and meta tensors for tensors:
    a fed program runs them on every call's values, as recording would (`x.fill_(300)` of an
    int8 x raises)."""
    __slots__ = ("checks",)

    def __init__(self):
        super().__init__()
        self.checks = []

    def note_checked(self, check, args, kwargs) -> None:
        """Keep `check` to run on each call's fed numbers. A check may say what to run instead
        (`check.fed(args, kwargs)`; None where the numbers' types decide it: a fed number keeps
        its type)."""
        fed = getattr(check, "fed", None)
        if fed is not None:
            check = fed(args, kwargs)
            if check is None:
                return
        found = []

        def mark(v):
            tv = type(v)
            if tv is int or tv is float:
                k = self.get((tv, v))
                if k is not None:
                    found.append(k)
                    return FedNumber(k)
            elif tv is list or tv is tuple:
                return tv(mark(x) for x in v)
            return v
        args, kwargs = tuple(mark(v) for v in args), {n: mark(v) for n, v in kwargs.items()}
        if found:
            self.checks.append((check, meta.stand_in(args, "meta"),
                                {n: meta.stand_in(v, "meta") for n, v in kwargs.items()}))


# While the bridge traces a graph whose `.item()` inputs and int arguments it feeds at runtime
# (input_items.py). The traced values are made unlike any other number of the graph, so a runtime
# scalar of that type and value is that input.
SOURCED_NUMBERS: SourcedNumbers | None = None


class ViewWatch(threading.local):
    """While an in-place or out= kernel records (`on`), the roots of the views its call reads:
    its write can overlap memory only through them (overlap.py). Per thread: another thread's
    reads are none of this call's."""

    def __init__(self):
        self.on, self.roots = False, []


VIEW_WATCH = ViewWatch()


class _Recorder:
    """Converts one call's arguments; `inputs` are the node's input nodes."""
    __slots__ = ("inputs", "key")

    def __init__(self):
        self.inputs = []
        self.key = []

    def tensor(self, t):
        st = getattr(t.untyped_storage(), "_lazyxla", None)  # only lazyxla storages carry state
        inputs = self.inputs
        if st is not None:
            if type(st) is Buffer:
                node = st.node
            else:
                node = st.read()
                if VIEW_WATCH.on:
                    VIEW_WATCH.roots.append(st.root)
            if t.is_conj():  # (both bits: `torch._neg_view(z.conj())`)
                node = math_bits(node, True, t.is_neg())
            elif t.is_neg():
                node = math_bits(node, False, True)
            inputs.append(node)
            # strides too where not contiguous: the result's layout follows them
            self.key.append((t.shape, t.dtype) if t.is_contiguous() else (t.shape, t.dtype, t.stride()))
            n = len(inputs) - 1
            return _SLOT[n] if n < _NSLOT else Slot(n)
        if is_cpu_scalar(t):
            inputs.append(cpu_scalar_node(t))
            self.key.append(("cpu0", t.dtype))
            n = len(inputs) - 1
            return _SLOT[n] if n < _NSLOT else Slot(n)
        raise device_mismatch(t)

    def shape_of(self, t):
        """A tensor that gives only its shape and dtype (Lowering.like): no input node."""
        if getattr(t.untyped_storage(), "_lazyxla", None) is None and not is_cpu_scalar(t):
            raise device_mismatch(t)
        # (strides too where not contiguous: empty_like and co. keep a dense input's layout)
        self.key.append(("like", t.shape, t.dtype) if t.is_contiguous() else
                        ("like", t.shape, t.dtype, t.stride()))
        return None

    def value(self, v, runtime_scalar):
        tv = type(v)
        if tv in _NUMBERS:
            if tv is int and not -_I64 <= v < _I64:
                raise _too_large(v)
            if runtime_scalar:
                node = scalar_node(v)
                if SOURCED_NUMBERS is not None and (tv, v) in SOURCED_NUMBERS and tracing_here():
                    CPU_SCALAR_SOURCES[id(node)] = (node, SOURCED_NUMBERS[tv, v])
                self.inputs.append(node)
                self.key.append(tv)
                n = len(self.inputs) - 1
                return _SLOT[n] if n < _NSLOT else Slot(n)
            # (type, value): 6 == 6.0 == True in a dict key, but they give different dtypes;
            # repr keeps -0.0 apart from 0.0 (the graph key relies on this key being exact)
            self.key.append((tv, v) if tv is int or tv is bool or (tv is float and v) else (tv, repr(v)))
            return v
        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        if tv is list or tv is tuple:
            self.key.append(("[", len(v)))  # f([1, 2], 3) and f([1], 2, 3) differ
            return tuple([self.value(x, runtime_scalar) for x in v])
        if tv is torch.Generator:  # (its seed is fed to the program: record_node's `_key`)
            self.key.append(tv)
            return None
        if tv is torch.device:
            if v.type == _LAZY and v.index:
                check_device_index(v)
            v = torch.device(v.type) if v.type != _LAZY else None  # device is not part of a program
        self.key.append((tv, v))  # typed: numpy's float32(1) == float64(1)
        return v


_NUMBERS = frozenset((int, float, bool, complex))
_I64 = 2 ** 63


def _too_large(v: int) -> OverflowError:
    """lazyxla passes Python ints to its programs as int64: one past it raised at the next read."""
    return OverflowError(f"lazyxla: the Python int {v} does not fit in int64, as which lazyxla "
                         f"passes integer scalars (eager converts it to the tensor's dtype: a "
                         f"uint64 one, or wraps it); pass it as a tensor of that dtype")


_default_dtype = torch.get_default_dtype
_NSLOT = 1024
_SLOT = [Slot(i) for i in range(_NSLOT)]  # Slot(i) without a call, for the first 1024 inputs
_S0, _S1 = _SLOT[0], _SLOT[1]


def _indices_to_device(args, pos):
    """CPU index tensors moved to the device, and uint8 ones made masks (eager still takes them,
    with a deprecation warning; PyTorch's meta kernels refuse them)."""
    indices = args[pos]
    if not any(isinstance(i, torch.Tensor) and ((i.device.type == "cpu" and i.dim())
                                                or i.dtype is torch.uint8) for i in indices):
        return args
    return args[:pos] + ([_index_tensor(i) for i in indices],) + args[pos + 1:]


def _index_tensor(i):
    if not isinstance(i, torch.Tensor):
        return i
    if i.device.type == "cpu" and i.dim():
        i = i.to(_LAZY)
    if i.dtype is torch.uint8:
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                      "torch.bool instead.")
        i = i.bool()
    return i


def convert_args(op, args, kwargs, info=None):
    """-> (inputs, attrs template, meta key). The key may be unhashable (meta.infer copes).
    Index lists are already on the device (record_node moved them)."""
    if info is None:
        info = op_info(op)
    r = _Recorder()
    pos = info.scalar_pos
    if info.like and args and isinstance(args[0], torch.Tensor):
        targs = (r.shape_of(args[0]),) + tuple([r.value(a, i in pos) for i, a in enumerate(args)
                                                if i])
    else:
        targs = tuple([r.value(a, i in pos) for i, a in enumerate(args)])
    if kwargs:
        kw = info.scalar_kw
        tkw = []
        for k, v in kwargs.items():
            r.key.append(k)
            tkw.append((k, r.value(v, k in kw)))
        tkw = tuple(tkw)
    else:
        tkw = ()
    # (the default dtype too: it sets the dtype of `torch.zeros(n)` and of `int_tensor * 0.5`)
    return r.inputs, (targs, tkw), (info.uid, tuple(r.key), _default_dtype())


_GETITEM = Lowering("getitem", lambda xs, i: xs[i])


def output_nodes(node, spec) -> list:
    """The nodes of a recorded node's outputs (None for an undefined one), without tensors: what
    in-place and out= kernels write into their targets."""
    if node.shape is not None:  # one tensor (a multi-output node has no shape of its own)
        return [node]
    return [None if s is None else Node(_GETITEM, (node,), ((_S0, i), ()), s[0], s[1], key=i)
            for i, s in enumerate(spec)]


class PendingBudget:
    """Recordings keep their inputs alive; a program that never syncs would grow without bound.
    After `limit` recorded ops without a full sync (env LAZYXLA_MAX_PENDING_OPS, default 200000,
    0 disables) everything pending is executed (counter AutoSync). The bridge suspends this while
    it traces a graph."""
    def __init__(self):
        self.limit = envflags.count("LAZYXLA_MAX_PENDING_OPS", 200000, minimum=0)
        self.count = 0
        self.suspended = 0

    def tick(self):
        self.count += 1
        if self.count > self.limit > 0 and not self.suspended:
            from lazyxla import metrics
            from lazyxla.runtime import executor
            metrics.counter_inc("AutoSync")
            executor.sync_all()


BUDGET = PendingBudget()


def _reset_budget():
    BUDGET.count = 0


def _install():
    from lazyxla.runtime import executor
    executor._sync_listeners.append(_reset_budget)


_install()


def record_node(op, low: Lowering, args, kwargs, validate=None, info=None):
    """(the IR node of a functional op call, its output spec, eager's strides of its results
    where not contiguous: meta.infer_keyed's layout). `validate`: the in-place overload
    being recorded; its meta kernel runs (cached) on the same arguments, so PyTorch's in-place
    broadcasting and casting errors are raised before anything is recorded. `info`: op's
    op_info, where the caller holds it."""
    BUDGET.tick()
    if info is None:
        info = op_info(op)
    pos = info.cpu_indices
    if pos is not None and len(args) > pos:  # for the recording and the meta kernel alike
        args = _indices_to_device(args, pos)
    # an in-place call's scalars are checked by its own overload: eager words some errors apart
    vinfo = info if validate is None else op_info(validate)
    if vinfo.value_check is not None:
        if SOURCED_NUMBERS is not None and tracing_here():
            SOURCED_NUMBERS.note_checked(vinfo.value_check, args, kwargs)
        vinfo.value_check(*args, **kwargs)
    inputs, attrs, key = convert_args(op, args, kwargs, info)
    if validate is not None:
        meta.infer(validate, None if key is None else (vinfo.uid,) + key[1:], args, kwargs)
    spec, kid, single, layout = meta.infer_keyed(op, key, args, kwargs)
    if low.random:
        generator = kwargs.get("generator") or next(
            (a for a in args if isinstance(a, torch.Generator)), None)
        seed_node = rng.OVERRIDE[0]
        if seed_node is None:
            seed = rng.next_seed() if generator is None else rng.seed_from(generator)
            seed_node = scalar_node(seed, torch.int64, rng=True)
        inputs.append(seed_node)
        attrs = (attrs[0], attrs[1] + (("_key", Slot(len(inputs) - 1)),))
    if single:
        return Node(low, tuple(inputs), attrs, spec[0], spec[1], key=kid), spec, layout
    if not spec:  # an op with no tensor outputs (e.g. an empty _foreach list)
        return None, spec, None
    return Node(low, tuple(inputs), attrs, None, spec, key=kid), spec, layout


def record(op, low, args, kwargs, info=None):
    if info is None:
        info = op_info(op)
    node, spec, layout = record_node(op, low, args, kwargs, info=info)
    if node is None:
        return [] if isinstance(spec, (list, tuple)) else spec
    if node.shape is not None:  # one tensor
        return buf.wrap_node(node, layout)
    layout = layout or (None,) * len(spec)
    out = tuple(None if n is None else buf.wrap_node(n, lo)
                for n, lo in zip(output_nodes(node, spec), layout))
    return list(out) if info.returns_list else out


# ---------------------------------------------------------------- writes

def converted(node: Node, shape, dtype) -> Node:
    """`node` cast to dtype and broadcast to shape (what writing it into such a tensor means)."""
    if node.dtype is dtype and node.shape == shape:  # shape: a tuple or torch.Size
        return node
    shape = tuple(shape)
    return Node(_BROADCAST_CAST, (node,), ((_S0, shape), ()), shape, dtype, key=shape)


def _broadcast_cast(x, shape, _meta):
    import jax.numpy as jnp
    return jnp.broadcast_to(x, shape)


_BROADCAST_CAST = Lowering("broadcast_cast", _broadcast_cast, meta=True)


def write(t: torch.Tensor, node: Node) -> None:
    """Make `node` the new value of `t` (and of every alias of it)."""
    state_of(t).write(converted(node, t.shape, t.dtype))


def write_resizing(t: torch.Tensor, node: Node) -> None:
    """As write(), but an out= tensor of another shape is resized to the result as eager resizes
    out= tensors: within its storage it stays a tensor of that storage (ATen's fftfreq writes its
    negative half through an empty slice of its result so). An out= tensor of an empty storage
    (`out=torch.empty(0)`, which nothing can read through) takes a buffer of the result: `.data =`
    swaps its storage and sizes and keeps its Python identity."""
    if tuple(t.shape) == tuple(node.shape):
        write(t, node)
    elif t.untyped_storage().nbytes() == 0:
        t.data = buf.wrap_node(converted(node, node.shape, t.dtype))
    else:
        t.resize_(node.shape)
        write(t, node)


def record_view(op, low: Lowering, self, args, kwargs, info=None):
    st = getattr(self.untyped_storage(), "_lazyxla", None)
    if st is None:
        raise device_mismatch(self)
    chain = st.chain if type(st) is View else ()
    if op is _AS_STRIDED or op is _AS_STRIDED_:
        _check_in_storage(self, args, kwargs)
    if (op is _AS_STRIDED or op is _AS_STRIDED_) and (chain or st.root.layout is not None) \
            and self.dtype == st.root.node.dtype:
        # as_strided addresses the storage, not the view: apply it to the root's value in memory
        # order (its dims permuted by its layout), at the view's own offset unless one is given
        size, stride, *off = list(args) + ([kwargs["storage_offset"]] if "storage_offset" in kwargs else [])
        args = (size, stride, self.storage_offset() if not off or off[0] is None else off[0])
        kwargs = {}
        chain, self = _memory_order(st.root)
    r = _Recorder()
    rest = tuple([r.value(a, False) for a in args])
    kw = tuple([(k, r.value(v, False)) for k, v in kwargs.items()]) if kwargs else ()
    if r.inputs:
        raise NotImplementedError(f"lazyxla: view op {op} with tensor arguments")
    key = ((info or op_info(op)).uid, self.shape, self.dtype, tuple(r.key), tuple(kwargs))
    if not self.is_contiguous():  # (strides decide whether eager allows the view: x.t().view(-1))
        key += (self.stride(),)
    attrs = ((_S0,) + rest, kw)
    if low.offset is None:
        (shape, dtype), kid, _, _ = meta.infer_keyed(op, key, (self,) + tuple(args), kwargs)
        layout = meta.view_layout(op, key, self, args, kwargs)
    else:  # (a slice at a new start: no meta run)
        ((shape, dtype), kid, _, _), layout = meta.view_at_start(op, low.offset, key, self, args,
                                                                 kwargs, attrs)
    entry = (low, attrs, ((_S0, _S1) + rest, kw), shape, dtype, kid)
    view = View(st.root, chain + (entry,))
    if torch.is_inference_mode_enabled() and not self.is_inference():
        # eager's view of a normal tensor is a normal tensor, even in inference mode (autograd
        # then shares the base's version counter, which an inference tensor cannot take)
        with torch.inference_mode(False):
            out = _view_tensor(view, shape, dtype, layout)
    elif self.is_inference() and not torch.is_inference_mode_enabled():
        # and a view of an inference tensor is one, outside inference mode too (eager then
        # refuses in-place updates to it and saving it for backward)
        with torch.inference_mode():
            out = _view_tensor(view, shape, dtype, layout)
    else:
        out = _view_tensor(view, shape, dtype, layout)
    # a view keeps its base's lazy conjugate/negative bits, as eager's (its data is the base's)
    if self.is_conj():
        torch._C._set_conj(out, True)
    if self.is_neg():
        torch._C._set_neg(out, True)
    return out


def _view_tensor(view, shape, dtype, layout):
    if layout is None:
        return new_tensor(view, shape, dtype)
    return buf.new_strided_tensor(view, shape, dtype, *layout)


_AS_STRIDED, _AS_STRIDED_ = torch.ops.aten.as_strided.default, torch.ops.aten.as_strided_.default


def _check_in_storage(self, args, kwargs) -> None:
    """eager's error for an as_strided view that reaches past its storage (XLA would clamp the
    reads: the last row of `arange(10).as_strided((4, 4), (3, 1))` was [9, 9, 9, 9])."""
    size, stride, *off = list(args) + ([kwargs["storage_offset"]] if "storage_offset" in kwargs else [])
    offset = self.storage_offset() if not off or off[0] is None else off[0]
    if not all(type(v) is int for v in (*size, *stride, offset)) or 0 in size:
        return  # (symbolic sizes: the meta kernel's checks; an empty view reaches nothing)
    item = self.element_size()
    need = item * (offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1)
    have = self.untyped_storage().nbytes()
    if need > have:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
                           f"{offset}, and itemsize {item} requiring a storage size of {need} are "
                           f"out of bounds for storage of size {have}")


def _root_meta(root: Buffer) -> torch.Tensor:
    return torch.empty(root.node.shape, dtype=root.node.dtype, device="meta")


_PERMUTE = torch.ops.aten.permute.default


def _memory_order(root: Buffer):
    """(view chain, meta tensor) of the root's elements in memory order: () and the root for a
    contiguous one, a permute of its dims by decreasing stride for a root with a layout."""
    m = _root_meta(root)
    if root.layout is None:
        return (), m
    perm = sorted(range(len(root.layout)), key=lambda d: -root.layout[d])
    info = op_info(_PERMUTE)
    low = VIEWS[_PERMUTE]
    key = (info.uid, m.shape, m.dtype, (("[", len(perm)),) + tuple((int, p) for p in perm), ())
    (shape, dtype), kid, _, _ = meta.infer_keyed(_PERMUTE, key, (m, perm), {})
    entry = (low, ((_S0, tuple(perm)), ()), ((_S0, _S1, tuple(perm)), ()), shape, dtype, kid)
    return (entry,), torch.empty(shape, dtype=dtype, device="meta")

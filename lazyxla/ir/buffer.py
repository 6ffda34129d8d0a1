"""Lazy state carried by a lazyxla tensor's storage.

A tensor's storage object is shared by every alias PyTorch makes itself (Parameter, detach, saved
tensors), so the state lives there as the attribute `_lazyxla`. A root storage holds a `Buffer`:
its current value as an IR node (device data, or a pending computation). A view made by a view op
gets a storage of its own holding a `View`: its root buffer and the chain of view ops leading to it.
Reads replay the chain on the root's current value; writes scatter back into the root, so a write
through any view is seen by the base and by every other view (functionalization).
"""
from __future__ import annotations

import math
import threading
import weakref

import torch

from .node import DATA, Node

_ATTR = "_lazyxla"

class _OrderedWeakSet:
    """A weak set that iterates in insertion order. WeakSet's order follows object addresses, so a
    sync's output order (part of the graph key) changed from step to step and recompiled. Keyed by
    id(): adding a member again (every in-place write does) is one dict lookup, where a
    WeakKeyDictionary makes a new weak reference each time."""
    __slots__ = ("_d",)

    def __init__(self):
        self._d = {}  # id(x) -> weakref to x; the reference's callback drops the entry

    def add(self, x) -> None:
        k = id(x)
        d = self._d
        if k not in d:
            d[k] = weakref.ref(x, lambda _, k=k, pop=d.pop: pop(k, None))

    def discard(self, x) -> None:
        # Dropping the reference drops its callback too, so a later object with this id is safe.
        self._d.pop(id(x), None)

    def __iter__(self):
        return iter([x for x in [r() for r in list(self._d.values())] if x is not None])

    def __len__(self):
        return len(self._d)

    def __contains__(self, x):
        r = self._d.get(id(x))
        return r is not None and r() is x


class _PendingSet(_OrderedWeakSet):
    """The buffers sync() executes. While the dynamo bridge traces a graph, the tracing thread's
    pending buffers are kept apart (`trace`): the trace's undo reverts those alone, and no other
    thread's sync executes them, nor does the undo drop another thread's recording."""
    __slots__ = ("trace", "tracer")

    def __init__(self):
        super().__init__()
        self.trace, self.tracer = None, None

    def add(self, x) -> None:
        if self.tracer is not None and self.tracer == threading.get_ident():
            self.trace.add(x)
        else:
            _OrderedWeakSet.add(self, x)

    def discard(self, x) -> None:
        self._d.pop(id(x), None)
        if self.trace is not None:
            self.trace.discard(x)

    def begin_trace(self):
        """Keep the calling thread's pending buffers apart from now on; returns what end_trace
        restores (a trace within a trace keeps its own)."""
        saved = self.trace, self.tracer
        self.trace, self.tracer = _OrderedWeakSet(), threading.get_ident()
        return saved

    def end_trace(self, saved) -> list:
        """Stop keeping the trace apart; returns the buffers it left pending."""
        left = list(self.trace)
        self.trace, self.tracer = saved
        return left


# Buffers whose value is a pending computation; sync() executes them.
PENDING = _PendingSet()

# Held by whatever walks or executes the pending recording (a graph cut marks shared nodes; a sync
# rewrites buffers) and by a bridge trace from start to undo: threads that share lazyxla tensors'
# nodes (a model's parameters) then never interleave those steps. Re-entrant: a trace syncs.
RUNTIME_LOCK = threading.RLock()


class Buffer:
    """`committed` is the last device data this buffer held: clearing the pending recording (the
    dynamo bridge does after a trace) reverts the buffer to it."""
    __slots__ = ("node", "committed", "layout", "__weakref__")

    def __init__(self, node: Node):
        self.node = node
        self.layout = None  # eager's strides of the root tensor, when not contiguous
        if node.op is DATA:
            self.committed = node
        else:
            self.committed = None
            PENDING.add(self)

    def read(self) -> Node:
        return self.node

    def write(self, node: Node) -> None:
        self.node = node
        if node.op is DATA:
            self.committed = node
        else:
            PENDING.add(self)

    @property
    def root(self) -> "Buffer":
        return self


class View:
    """`chain` is a tuple of (view Lowering, read attrs, scatter attrs, shape, dtype, key) applied
    to the root's value (key: the recorder's exact signature of the view op)."""
    __slots__ = ("base", "chain", "_src", "_node", "__weakref__")

    def __init__(self, base: Buffer, chain: tuple):
        self.base, self.chain = base, chain
        self._src = self._node = None

    @property
    def root(self) -> Buffer:
        return self.base

    def read(self) -> Node:
        src = self.base.node
        if self._src is not src:  # memoised per root value: repeated reads build no new nodes
            node = src
            for low, attrs, _, shape, dtype, key in self.chain:
                node = Node(low, (node,), attrs, shape, dtype, key=key)
            self._src, self._node = src, node
        return self._node

    def forget_read(self) -> None:
        """Drop read()'s memo: the next read builds the chain from the root's node again (the
        memoised node may have become device data of its own: a read that ran it)."""
        self._src = None

    def write(self, node: Node) -> None:
        values = [self.base.node]
        for low, attrs, _, shape, dtype, key in self.chain[:-1]:
            values.append(Node(low, (values[-1],), attrs, shape, dtype, key=key))
        for (low, _, sattrs, _, _, key), outer in zip(reversed(self.chain), reversed(values)):
            node = Node(low.scatter, (outer, node), sattrs, outer.shape, outer.dtype, key=key)
        self.base.write(node)


def state_of(t: torch.Tensor):
    """The Buffer or View of a lazyxla tensor."""
    return getattr(t.untyped_storage(), _ATTR)


def storage_state(storage, *default):
    """The Buffer or View a lazyxla storage carries (`default` for a storage with none)."""
    return getattr(storage, _ATTR, *default)


def has_state(t: torch.Tensor) -> bool:
    return t.device.type == "lazyxla" and hasattr(t.untyped_storage(), _ATTR)


def node_of(t: torch.Tensor) -> Node:
    return getattr(t.untyped_storage(), _ATTR).read()


def attach(t: torch.Tensor, state) -> torch.Tensor:
    setattr(t.untyped_storage(), _ATTR, state)
    return t


def attach_storage(storage, state):
    setattr(storage, _ATTR, state)
    return storage


def new_tensor(state, shape, dtype: torch.dtype) -> torch.Tensor:
    """A real torch.Tensor on the lazyxla device with no host memory, carrying `state`."""
    t = torch._C._acc.create_empty_tensor(shape, dtype)
    setattr(t.untyped_storage(), _ATTR, state)
    return t


_SET_STORAGE = torch.ops.aten.set_.source_Storage_storage_offset._handle
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def new_strided_tensor(state, shape, dtype: torch.dtype, stride, offset: int, span: int) -> torch.Tensor:
    """As new_tensor, reporting the strides and storage offset eager gives a view (`x.t()` is not
    contiguous; `x[1:]` starts at offset 1), so PyTorch's own stride-based choices (`contiguous()`,
    `reshape` copy or view, autograd's as_strided) are eager's."""
    return restrided(torch._C._acc.create_empty_tensor((0,), dtype), state, shape, stride, offset, span)


def restrided(t: torch.Tensor, state, shape, stride, offset: int, span: int) -> torch.Tensor:
    """t, holding `state` on a storage of its own with that geometry; t keeps its identity,
    dtype and version counter. The storage covers `span` elements without allocating them; set_
    goes straight to the CPU kernel, which only sets the geometry."""
    storage = torch._C._construct_storage_from_data_pointer(0, t.device, span * t.dtype.itemsize)
    _SET_STORAGE.redispatch_boxed(_CPU_KEYS, t, storage, offset, shape, stride)
    setattr(storage, _ATTR, state)
    return t


def wrap_node(node: Node, layout=None) -> torch.Tensor:
    """A root tensor holding node's value; `layout`: eager's strides for it when not contiguous
    (a permutation of the dims: the value stays in dim order, only the reported strides differ)."""
    if layout is None:
        return new_tensor(Buffer(node), node.shape, node.dtype)
    b = Buffer(node)
    b.layout = layout
    return new_strided_tensor(b, node.shape, node.dtype, layout, 0, math.prod(node.shape))

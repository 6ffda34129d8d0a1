"""Floats a graph reads from its inputs with `.item()`, fed to its program on every call.

Dynamo passes a Python float that changes between calls (an optimizer's learning rate under a
scheduler) as a 0-dim CPU tensor and reads it with `.item()` inside the graph; the optimizer may
go on with Python arithmetic (`-lr`, `1 - lr * weight_decay`). Keyed by value, every new value
re-traced the graph: a compiled optimizer step with any scheduler re-traced on every step.

Instead, where the reads and the arithmetic on them (+ - * / ** and negation: no branches) feed
only torch ops, every call computes those floats in Python (ItemFeed.values) and feeds them to the
program as runtime scalars. To find which runtime scalars they are, the bridge traces the graph
with stand-ins for the reads, binary fractions unlike the graph's other numbers; the recorder
ties a runtime scalar holding one of the resulting values to that float (dispatch.SOURCED_FLOATS).

That is right only if the program depends on the floats through those scalars alone: an op may
take one as an attribute, or a PyTorch kernel compute with it before lazyxla records. So the graph
is traced twice, with two sets of stand-ins, and fed only if both traces make the same program:
the same hash, inputs, constants and outputs. Otherwise it stays keyed by the values."""
from __future__ import annotations

import contextlib
import math
import operator

import numpy as np
import torch
import torch.fx

from lazyxla.device import dispatch
from . import matcher as m
from . import outputs as o

# Arithmetic whose result is one formula of its operands, without branches: computed afresh on
# every call it gives what a new trace would. (min, abs, comparisons, // and % branch.)
_ARITHMETIC = frozenset({operator.add, operator.sub, operator.mul, operator.truediv, operator.neg,
                         operator.pos, operator.pow, torch.sym_float})
# Functions whose Python float arguments PyTorch hands to its ops unchanged: torch's own builtins
# (torch.mul, torch._foreach_div_) and aten overloads.
_TORCH_BUILTIN_MODULES = frozenset({"torch", "torch._C._nn", "torch._C._linalg", "torch._C._special",
                                    "torch._C._fft"})
# Two affine maps from a read to its stand-ins: binary fractions that no graph's constants are
# likely to hold.
_MAPS = ((1.0625, 2.0 ** -7 + 2.0 ** -20), (0.9375, 3 * 2.0 ** -8 + 2.0 ** -21))


class NotFeedable(Exception):
    """This call's floats are not all floats (a power of a negative number is complex)."""


class _Tracing:
    """While the bridge traces with stand-ins: the stand-in of each read, and whether two fed
    floats (or a float and a non-float) could not be told apart."""
    def __init__(self, stand_ins):
        self.stand_ins, self.ambiguous = stand_ins, False


_tracing: _Tracing | None = None


def _fed(k, value):
    """Registers the k-th fed float's traced value, so that the recorder can tie it to k."""
    t = _tracing
    if t is not None:
        known = dispatch.SOURCED_FLOATS.get(value, k) if type(value) is float else None
        if known != k or not math.isfinite(value):
            t.ambiguous = True
        else:
            dispatch.SOURCED_FLOATS[value] = k
    return value


def _read(k, x):
    t = _tracing
    return _fed(k, x.item() if t is None else t.stand_ins[k])


def _computing(fn):
    def compute(k, *args):
        return _fed(k, fn(*args))
    compute.__name__ = compute.__qualname__ = f"fed_{fn.__name__}"
    return compute


_COMPUTE = {fn: _computing(fn) for fn in _ARITHMETIC}  # (FX prints no builtin as an argument)


class ItemFeed:
    """The fed floats of one graph: its `.item()` reads of inputs and the arithmetic on them."""

    def __init__(self, gm, fed):
        # One index per distinct computation: Dynamo writes `-lr` once per parameter of a
        # for-loop optimizer, and equal values from two indices could not be told apart.
        index, first, signature = {}, [], {}
        for n in fed:
            if n.op == "call_method":
                sig = ("read", n.args[0])
            else:
                sig = (n.target,) + tuple(("fed", index[a]) if isinstance(a, torch.fx.Node)
                                          else (type(a), repr(a)) for a in n.args)
            if sig not in signature:
                signature[sig] = len(first)
                first.append(n)
            index[n] = signature[sig]
        self.reads = [k for k, n in enumerate(first) if n.op == "call_method"]
        self.reading_gm = _rewrite(gm, index)
        self.values_fn = _values_module(gm, fed, first)
        self._values = self.values_fn.forward  # (every call: without nn.Module's __call__)

    @classmethod
    def of(cls, gm, positions):
        """The feed of gm's reads of the placeholders at `positions`, or None where a read or a
        float computed from one reaches anything but torch ops and that arithmetic."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        targets = {placeholders[i] for i in positions}
        fed, seen = [], set()
        for n in gm.graph.nodes:
            if _is_read(n, targets) or _is_arithmetic_on(n, seen.__contains__):
                fed.append(n)
                seen.add(n)
        if not fed or any(u not in seen and not _takes_floats_unchanged(u, n) for n in fed for u in n.users):
            return None
        return cls(gm, fed)

    def values(self, args) -> tuple:
        vals = self._values(*args)
        for v in vals:
            if type(v) is not float:
                raise NotFeedable(f"a float computed from the graph's .item() inputs is {v!r}")
        return vals

    def stand_ins(self, args) -> tuple | None:
        """Two sets of stand-ins for the reads ({index: value}), or None where a read is not a
        finite float."""
        values = self.values_fn(*args)
        reads = {k: values[k] for k in self.reads}
        if not all(type(v) is float and math.isfinite(v) for v in reads.values()):
            return None
        # (offset by the read's number: two reads of equal values get apart stand-ins)
        sets = tuple({k: v * a + b * (1 + i) for i, (k, v) in enumerate(reads.items())}
                     for a, b in _MAPS)
        if any(len(set(s.values())) != len(s) for s in sets):
            return None
        return sets


@contextlib.contextmanager
def traced_with(stand_ins):
    """Trace with `stand_ins` for the reads; yields the _Tracing, whose `ambiguous` says whether
    the trace could tell every fed float apart."""
    global _tracing
    saved = _tracing, dispatch.SOURCED_FLOATS
    _tracing, dispatch.SOURCED_FLOATS = _Tracing(stand_ins), {}
    try:
        yield _tracing
    finally:
        _tracing, dispatch.SOURCED_FLOATS = saved


def is_float_of_read_only_inputs(n) -> bool:
    """A float read from a graph input (`lr.item()`), or branch-free arithmetic on such floats and
    numbers alone, of inputs the graph does nothing but read with `.item()`: no op between the
    read and its use can change them (as `step += 1` changes an optimizer's step count)."""
    if _is_read(n):
        return all(_is_read(u) for u in n.args[0].users)
    return _is_arithmetic_on(n, is_float_of_read_only_inputs)


def _is_read(n, targets=None) -> bool:
    """`p.item()` of a placeholder p (of one of `targets`, where given)."""
    return n.op == "call_method" and n.target == "item" and len(n.args) == 1 and (
        n.args[0] in targets if targets is not None
        else isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder")


def _is_arithmetic_on(n, is_fed) -> bool:
    """Branch-free arithmetic on nodes that `is_fed` accepts and on numbers."""
    if n.op != "call_function" or n.target not in _ARITHMETIC or n.kwargs or not n.all_input_nodes:
        return False
    return all(is_fed(a) if isinstance(a, torch.fx.Node) else type(a) in (int, float) for a in n.args)


def _takes_floats_unchanged(user, read) -> bool:
    if user.op == "call_method":  # a Tensor method, the float an argument (never the receiver)
        return bool(user.args) and user.args[0] is not read
    if user.op != "call_function":
        return False  # the graph's output, or a module call
    t = user.target
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if t in _ARITHMETIC:  # `lr / bias_correction` with a tensor: the Tensor's own op takes lr
        val = user.meta.get("example_value", user.meta.get("val"))
        return isinstance(val, torch.Tensor)
    return type(t) is type(torch.mul) and getattr(t, "__module__", None) in _TORCH_BUILTIN_MODULES


def _rewrite(gm, index):
    """A copy of gm (sharing its attributes and submodules) whose fed nodes register their values."""
    graph = torch.fx.Graph()
    env: dict = {}
    graph.output(graph.graph_copy(gm.graph, env))
    for old, k in index.items():
        new = env[old]
        with graph.inserting_before(new):
            if old.op == "call_method":
                call = graph.call_function(_read, (k, new.args[0]))
            else:
                call = graph.call_function(_COMPUTE[new.target], (k,) + tuple(new.args))
        new.replace_all_uses_with(call)
        graph.erase_node(new)
    out = torch.fx.GraphModule(gm, graph)
    out.recompile()
    return out


def _values_module(gm, fed, outputs):
    """A module of gm's placeholders that computes the fed floats and returns `outputs`' values."""
    graph = torch.fx.Graph()
    env: dict = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = graph.node_copy(n)
    for n in fed:
        env[n] = graph.node_copy(n, lambda a: env[a])
    graph.output(tuple(env[n] for n in outputs))
    out = torch.fx.GraphModule(torch.nn.Module(), graph)
    out.recompile()
    return out


def same_program(a, b) -> bool:
    """Two extractions of one graph, traced with different stand-ins, make the same program fed
    the same way: then the reads reach it only through the runtime scalars."""
    if a.hash != b.hash or a.mutated != b.mutated or a.container is not b.container:
        return False
    if (a.matcher is None) != (b.matcher is None):
        return False
    if a.matcher is not None and not _same_plan(a.matcher.plan, b.matcher.plan):
        return False
    return _same_outputs(a.outputs, b.outputs)


def _same_plan(p, q) -> bool:
    if len(p) != len(q):
        return False
    for (kind, v), (kind2, w) in zip(p, q):
        if kind != kind2 or not (_same_array(v, w) if kind == m.CONST else v == w):
            return False
    return True


def _same_outputs(h, k) -> bool:
    if len(h.recipe) != len(k.recipe) or len(h.groups) != len(k.groups):
        return False
    for (kind, v), (kind2, w) in zip(h.recipe, k.recipe):
        if kind != kind2:
            return False
        if kind == o.INT:
            same = type(v) is type(w) and repr(v) == repr(w)
        elif kind == o.CONST:
            same = _same_array(v[0], w[0]) and v[1:] == w[1:]
        else:
            same = v == w
        if not same:
            return False
    for ((gk, gv), layout), ((gk2, gw), layout2) in zip(h.groups, k.groups):
        if gk != gk2 or layout != layout2:
            return False
        if not (_same_array(gv.data, gw.data) if gk == o.CONST else gv == gw):
            return False
    return True


def _same_array(x, y) -> bool:
    """Bitwise: -0.0 and 0.0 differ, a NaN equals itself."""
    if x is y:
        return True
    if not (hasattr(x, "shape") and hasattr(y, "shape")):
        return type(x) is type(y) and repr(x) == repr(y)
    if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
        return False
    return np.asarray(x).tobytes() == np.asarray(y).tobytes()

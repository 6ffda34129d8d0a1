"""Numbers a graph takes from its inputs, fed to its program on every call.

Dynamo passes a Python float that changes between calls (an optimizer's learning rate under a
scheduler) as a 0-dim CPU tensor and reads it with `.item()` inside the graph; the optimizer may
go on with Python arithmetic (`-lr`, `1 - lr * weight_decay`). A Python int that changes (a
timestep, a step count) arrives as an int argument (a SymInt placeholder). Keyed by value, every
new value re-traced the graph: a compiled optimizer step with any scheduler re-traced on every step.

Instead, where those numbers and the arithmetic on them (+ - * / ** and negation: no branches)
feed only torch ops, every call computes them in Python (ItemFeed.values) and feeds them to the
program as runtime scalars. To find which runtime scalars they are, the bridge traces the graph
with stand-ins for the inputs, numbers unlike the graph's others (binary fractions for floats,
large odd ints for ints); the recorder ties a runtime scalar holding one of the resulting values
to that number (dispatch.SOURCED_NUMBERS).

That is right only if the program depends on the numbers through those scalars alone: an op may
take one as an attribute (a shape, a dim), or a PyTorch kernel compute with it before lazyxla
records. So the graph is traced twice, with two sets of stand-ins, and fed only if both traces make
the same program: the same hash, inputs, constants and outputs. Otherwise it stays keyed by the
values. Ops whose scalar values lazyxla checks as it records (`x.fill_(300)` of an int8 x raises,
as in eager) have those checks run on every call's fed values (run_checks)."""
from __future__ import annotations

import contextlib
import math
import operator

import numpy as np
import torch
import torch.fx

from lazyxla.device import dispatch
from . import matcher as m
from .fed_numbers import put
from . import outputs as o

# Arithmetic whose result is one formula of its operands, without branches: computed afresh on
# every call it gives what a new trace would. (min, abs, comparisons, // and % branch.)
_ARITHMETIC = frozenset({operator.add, operator.sub, operator.mul, operator.truediv, operator.neg,
                         operator.pos, operator.pow, torch.sym_float})
# Functions whose Python float arguments PyTorch hands to its ops unchanged: torch's own builtins
# (torch.mul, torch._foreach_div_) and aten overloads.
_TORCH_BUILTIN_MODULES = frozenset({"torch", "torch._C._nn", "torch._C._linalg", "torch._C._special",
                                    "torch._C._fft"})
# Two affine maps from a float read to its stand-ins: binary fractions that no graph's constants
# are likely to hold.
_MAPS = ((1.0625, 2.0 ** -7 + 2.0 ** -20), (0.9375, 3 * 2.0 ** -8 + 2.0 ** -21))
# An int argument's stand-ins: odd numbers no graph is likely to hold, apart by more than a
# small formula moves them (n + 1, 2 * n).
_INT_STAND_INS = (1_000_003, 3_000_017)
_INT_STEP = 10_007
_INT64 = (-2 ** 63, 2 ** 63)


class NotFeedable(Exception):
    """This call's numbers do not have the types traced (a power of a negative number is complex,
    `n ** -1` a float) or an int does not fit in int64."""


class _Tracing:
    """While the bridge traces with stand-ins: the stand-in of each input, the type of each fed
    number, and whether two fed numbers (or a fed number and another) could not be told apart."""
    def __init__(self, stand_ins):
        self.stand_ins, self.ambiguous, self.types, self.checks = stand_ins, False, {}, ()
        self.values = {}  # each fed number's traced value


_tracing: _Tracing | None = None


def _fed(k, value):
    """Registers the k-th fed number's traced value, so that the recorder can tie it to k."""
    t = _tracing
    if t is not None:
        tv = type(value)
        t.types[k], t.values[k] = tv, value
        if tv is float and math.isfinite(value) or tv is int:
            known = dispatch.SOURCED_NUMBERS.setdefault((tv, value), k)
        else:
            known = None
        if known != k:
            t.ambiguous = True
    return value


def _read(k, x):
    t = _tracing
    return _fed(k, x.item() if t is None else t.stand_ins[k])


def _arg(k, n):
    """An int argument, fed as the k-th number."""
    t = _tracing
    return _fed(k, n if t is None else t.stand_ins[k])


def _computing(fn):
    def compute(k, *args):
        return _fed(k, fn(*args))
    compute.__name__ = compute.__qualname__ = f"fed_{fn.__name__}"
    return compute


_COMPUTE = {fn: _computing(fn) for fn in _ARITHMETIC}  # (FX prints no builtin as an argument)


class ItemFeed:
    """The fed numbers of one graph: its `.item()` reads of inputs, its int arguments, and the
    arithmetic on them."""

    def __init__(self, gm, fed):
        # One index per distinct computation: Dynamo writes `-lr` once per parameter of a
        # for-loop optimizer, and equal values from two indices could not be told apart.
        index, first, signature = {}, [], {}
        for n in fed:
            if n.op == "call_method":
                sig = ("read", n.args[0])
            elif n.op == "placeholder":
                sig = ("arg", n)
            else:
                sig = (n.target,) + tuple(("fed", index[a]) if isinstance(a, torch.fx.Node)
                                          else (type(a), repr(a)) for a in n.args)
            if sig not in signature:
                signature[sig] = len(first)
                first.append(n)
            index[n] = signature[sig]
        self.reads = [k for k, n in enumerate(first) if n.op == "call_method"]
        self.args = [k for k, n in enumerate(first) if n.op == "placeholder"]
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.int_positions = frozenset(i for i, n in enumerate(placeholders) if n in index)
        read = {n.args[0] for n in fed if n.op == "call_method"}
        self.item_positions = frozenset(i for i, n in enumerate(placeholders) if n in read)
        self.reading_gm = _rewrite(gm, index)
        self.values_fn = _values_module(gm, fed, first)
        self._values = self.values_fn.forward  # (every call: without nn.Module's __call__)
        self.types = None  # each fed number's type, set when a trace with stand-ins agrees

    @classmethod
    def of(cls, gm, positions, int_positions=()):
        """The feed of gm's reads of the placeholders at `positions` and of its int arguments at
        `int_positions`, or None where none is left. A read, or a number computed from one, that
        reaches anything but torch ops and that arithmetic gives None; an int argument that does
        is left out (keyed)."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        targets = {placeholders[i] for i in positions}
        ints = {placeholders[i] for i in int_positions}
        while True:
            fed, roots = [], {}
            for n in gm.graph.nodes:
                if n in ints:
                    roots[n] = {n}
                elif _is_read(n, targets):
                    roots[n] = {None}
                elif _is_arithmetic_on(n, roots.__contains__):
                    roots[n] = set().union(*(roots[a] for a in n.all_input_nodes))
                else:
                    continue
                fed.append(n)
            bad = set().union(*(roots[n] for n in fed
                                if any(u not in roots and not _takes_floats_unchanged(u, n)
                                       for u in n.users)))
            if None in bad:
                return None
            if not bad:
                return cls(gm, fed) if fed else None
            ints -= bad

    def values(self, args) -> tuple:
        vals = self._values(*args)
        if tuple(map(type, vals)) != self.types:
            raise NotFeedable(f"the numbers computed from the graph's inputs are {vals}, of "
                              f"other types than traced ({', '.join(t.__name__ for t in self.types)})")
        for v in vals:
            if type(v) is int and not _INT64[0] <= v < _INT64[1]:
                raise NotFeedable(f"the int {v} does not fit in int64")
        return vals

    def stand_ins(self, args) -> tuple | None:
        """Two sets of stand-ins for the reads and int arguments ({index: value}), or None where
        a read is not a finite float or an argument not an int."""
        values = self.values_fn(*args)
        reads = {k: values[k] for k in self.reads}
        if not all(type(v) is float and math.isfinite(v) for v in reads.values()):
            return None
        if not all(type(values[k]) is int for k in self.args):
            return None
        # (offset by the read's number: two reads of equal values get apart stand-ins)
        sets = tuple({k: v * a + b * (1 + i) for i, (k, v) in enumerate(reads.items())}
                     for a, b in _MAPS)
        for s, base in zip(sets, _INT_STAND_INS):
            s.update({k: base + 2 * _INT_STEP * i for i, k in enumerate(self.args)})
        if any(len(set(s.values())) != len(s) for s in sets):
            return None
        return sets

    def agree(self, args, tracings) -> bool:
        """Whether the traces with stand-ins fed numbers of the types this call's values have;
        if so, those types are what every later call must give."""
        types = tuple(map(type, self.values_fn(*args)))
        if any(tuple(t.types.get(k) for k in range(len(types))) != types for t in tracings):
            return False
        self.types = types
        return True


@contextlib.contextmanager
def traced_with(stand_ins):
    """Trace with `stand_ins` for the reads and int arguments; yields the _Tracing, whose
    `ambiguous` says whether the trace could tell every fed number apart, `checks` which value
    checks took one."""
    global _tracing
    saved = _tracing, dispatch.SOURCED_NUMBERS
    _tracing, dispatch.SOURCED_NUMBERS = _Tracing(stand_ins), dispatch.SourcedNumbers()
    try:
        yield _tracing
    finally:
        _tracing.checks = tuple(dispatch.SOURCED_NUMBERS.checks)
        _tracing, dispatch.SOURCED_NUMBERS = saved


def run_checks(checks, fed) -> None:
    """The value checks a fed program's ops made as they recorded, on this call's fed values."""
    for check, args, kwargs in checks:
        if args is None:  # a check that takes the fed numbers (fed_starts.StartCheck)
            check(fed)
        else:
            check(*put(args, fed), **{n: put(v, fed) for n, v in kwargs.items()})


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


# Namespaces of PyTorch's own operators, whose kernels compute with a number argument as a value.
# A user's op (torch.library.custom_op) runs a Python kernel, traced once, that may branch on it
# (`x * (n if n > 2 else -n)`): its numbers are keyed by value, and its CPU tensors read per call.
_OWN_NAMESPACES = frozenset({"aten", "prims"})


def is_user_op(t) -> bool:
    if isinstance(t, torch._ops.OpOverload):
        return t.namespace not in _OWN_NAMESPACES
    if isinstance(t, torch._ops.OpOverloadPacket):
        return t._qualified_op_name.split("::")[0] not in _OWN_NAMESPACES
    return False


def _takes_floats_unchanged(user, read) -> bool:
    if user.op == "call_method":  # a Tensor method, the float an argument (never the receiver)
        return bool(user.args) and user.args[0] is not read
    if user.op == "output":  # returned: this call's value (outputs.FED)
        return True
    if user.op != "call_function":
        return False  # a module call
    t = user.target
    if t is operator.getitem or t is operator.setitem:  # in a tensor's index (fed_starts.py)
        val = user.args[0].meta.get("example_value", user.args[0].meta.get("val")) \
            if isinstance(user.args[0], torch.fx.Node) else None
        return isinstance(val, torch.Tensor) and read is not user.args[0] and (
            t is operator.getitem or read not in user.args[2:])
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return not is_user_op(t)
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
        if old.op == "placeholder":  # an int argument: its uses read it through _arg
            with graph.inserting_after(new):
                call = graph.call_function(_arg, (k, new))
            new.replace_all_uses_with(call, delete_user_cb=lambda user: user is not call)
            continue
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
        if n.op != "placeholder":  # (an int argument is its own value)
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


def same_constants(a, b, values) -> bool:
    """Two extractions of one graph, one traced with stand-ins (`a`) and one at a call's own
    numbers (`b`; `values`: all the fed numbers of that call), make the same program with the
    same constants: the parameters either takes as a constant of the trace (a Python scalar of
    the graph, a start no fed number placed) are the same ones, of the same values. Where both
    compute a parameter on every call, they may do it differently (a view's start read from the
    argument in one, fed from the int in the other); its value is the call's in both. Their
    outputs are the same at the call's numbers (`x[:, :k]` is all of x at stand-ins past the
    end, not at k = -3)."""
    if a.hash != b.hash or (a.matcher is None) != (b.matcher is None):
        return False
    if not _same_outputs(a.outputs, b.outputs, values):
        return False
    if a.matcher is None:
        return True
    p, q = a.matcher.plan, b.matcher.plan
    return len(p) == len(q) and all(
        (kind == m.CONST) == (kind2 == m.CONST) and (kind != m.CONST or _same_array(v, w))
        for (kind, v), (kind2, w) in zip(p, q))


def _same_plan(p, q) -> bool:
    if len(p) != len(q):
        return False
    for (kind, v), (kind2, w) in zip(p, q):
        if kind != kind2 or not (_same_array(v, w) if kind == m.CONST else v == w):
            return False
    return True


def _same_outputs(h, k, values=None) -> bool:
    """`values`: compare the fed numbers returned and the views replayed on arguments as they
    are at these fed numbers (each trace marks as fed the numbers equal to its own)."""
    if len(h.recipe) != len(k.recipe) or len(h.groups) != len(k.groups):
        return False
    for (kind, v), (kind2, w) in zip(h.recipe, k.recipe):
        if values is not None:
            (kind, v), (kind2, w) = _at(kind, v, values), _at(kind2, w, values)
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


def _at(kind, v, values):
    """An output's recipe at the fed numbers `values`."""
    if kind == o.FED:
        return o.INT, values[v]
    if kind == o.VIEW_OF_INPUT:
        return kind, (v[0], put(v[1], values))
    return kind, v


def _same_array(x, y) -> bool:
    """Bitwise: -0.0 and 0.0 differ, a NaN equals itself."""
    if x is y:
        return True
    if not (hasattr(x, "shape") and hasattr(y, "shape")):
        return type(x) is type(y) and repr(x) == repr(y)
    if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
        return False
    return np.asarray(x).tobytes() == np.asarray(y).tobytes()

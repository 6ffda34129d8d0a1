"""Int arguments that index: fed as the starts of the views they place.

A loop that calls a compiled function with a new position each time (`x[i]`, `x[i:i + 3]`,
`cache[pos] = k`) gets a SymInt argument from Dynamo. Lazy mode's cut already takes such starts as
runtime scalars once they vary (ir/graph.py), so one program serves every position; here the bridge
ties each of those starts to the fed number it came from (input_items.py), and every call feeds it.

Two things differ from the other fed numbers:
  - Stand-ins far from the graph's numbers would index out of range (or a slice would clamp them).
    Where they fail, the graph is traced at this call's numbers (so the cut has seen a start to
    vary from), then with stand-ins next to them (near_stand_ins); where such a stand-in meets a
    number of the graph's own (`x[i] * 2` with i = 3 and a stand-in 2), the next pair is tried.
  - A program takes a start, but its length and its in-range reading are fixed when traced: XLA
    clamps a start out of range, and a Python slice at the end of a tensor is shorter. So every call
    computes each fed start's view again from the call's numbers (StartCheck); one that differs
    from the traced view (an index out of range, a negative one, a shorter last slice) raises
    OutsideTraced, and that call runs a program traced at its own values, which raises eager's
    error where eager does.

A view at the index that leaves the graph (returned, or saved by autograd for the backward) is
made again from the argument at each call's numbers (outputs.VIEW_OF_INPUT), and a backward given
it feeds its start (view_starts.py). An output whose shape, strides or offset the int sets must be
such a view taking the fed number (outputs_follow): stand-ins that a slice clamps alike (`x[:, :k]`
of 3 columns at k = 5 and 7) make it the whole of x, no fed number in its view.
"""
from __future__ import annotations

import torch

from lazyxla.device import dispatch
from lazyxla.ir.node import Slot
from .fed_numbers import count, mark, put
from .input_items import run_checks
from .matcher import CONST
from .outputs import VIEW_OF_INPUT

# Pairs of offsets from an int argument's value tried as its stand-ins, in order: both sides of it,
# then above (the first row), then below (the last row or slice).
_NEAR = ((1, -1), (1, 2), (-1, -2))


class OutsideTraced(Exception):
    """This call's numbers place a fed view elsewhere than its program reads (out of range, a
    negative index, a shorter slice): the call needs a program traced at its values."""


class StartCheck:
    """Recomputes where a view op with a fed start reads (or writes) for a call's fed numbers, and
    raises OutsideTraced unless that is the start fed and the view the program was cut with.
    `k`: the fed number the start is; None for a start the program takes as a constant (`start`)
    though the op's arguments hold a fed number: `x[k::2]` of 2 rows at k = -3 and -4 starts at 0
    both times, and at k = -1 at 1. Holds the base's shape, not the node (no IR outlives the
    trace). Called with the fed numbers themselves (input_items.run_checks): it puts them in place
    without walking the arguments."""
    __slots__ = ("offset", "base", "rest", "k", "start", "args", "kwargs", "at")

    def __init__(self, node, k, sourced, start=None):
        self.offset, self.k, self.start = node.op.offset, k, start
        self.base = node.shape if self.offset.output_base else node.inputs[0].shape
        self.rest = self.offset.start_of(self.base, node.attrs)[1]
        args, kwargs = node.attrs
        self.args, self.kwargs = mark(tuple(args), sourced), mark(tuple(kwargs), sourced)
        # (position, fed number) of each fed number among the arguments, where all are at the
        # top level; else None, and each call puts them in place by walking (fed_numbers.put)
        at = [(j, v.k) for j, v in enumerate(self.args) if type(v) is dispatch.FedNumber]
        self.at = tuple(at) if len(at) == count(self.args) and not count(self.kwargs) else None

    def __call__(self, fed):
        if self.at is not None:
            args = list(self.args)
            for j, k in self.at:
                args[j] = fed[k]
            attrs = (args, self.kwargs)
        else:
            attrs = (put(self.args, fed), put(self.kwargs, fed))
        try:
            start, rest = self.offset.start_of(self.base, attrs)
        except Exception as e:  # an index out of range
            raise OutsideTraced(str(e)) from None
        if start != (fed[self.k] if self.k is not None else self.start) or rest != self.rest:
            op = self.offset.dynamic.name.removeprefix("dynamic:")
            shown = [a for a in attrs[0] if not isinstance(a, Slot)]
            raise OutsideTraced(f"{op} with arguments {shown} of a tensor of shape "
                                f"{list(self.base)}: another view than traced")


def tie_starts(graph, sources) -> list:
    """While the bridge traces with stand-ins: ties each start the cut `graph` feeds that is a
    fed number to that number (`sources`, as dispatch ties runtime scalars) and notes its
    StartCheck with the fed numbers' places in the op's arguments (SourcedNumbers.checks).
    Returns (parameter index, StartCheck) of each start that is no fed number though its op's
    arguments hold one, for check_constant_starts."""
    sourced = dispatch.SOURCED_NUMBERS
    if sourced is None or not graph.starts or not dispatch.tracing_here():
        return []
    params = graph.params[len(graph.params) - len(graph.starts):]
    untied = []
    for i, (node, p) in enumerate(zip(graph.starts, params), len(graph.params) - len(params)):
        if type(p.data) is not int:
            continue
        k = sourced.get((int, p.data))
        if k is None:  # the graph's own start, a view argument's, or one a fed number places
            check = StartCheck(node, None, sourced, p.data)  # by Python's slicing rules alone
            if count(check.args) or count(check.kwargs):
                untied.append((i, check))
            continue
        sources[id(p)] = (p, k)
        sourced.checks.append((StartCheck(node, k, sourced), None, None))
    return untied


def check_constant_starts(untied, plan) -> None:
    """Notes the StartChecks of the starts `tie_starts` left untied (`untied`) that the program
    takes as constants (`plan`: the InputMatcher's); a view argument's start, read from it on every
    call, is none of them."""
    sourced = dispatch.SOURCED_NUMBERS
    for i, check in untied:
        if plan[i][0] == CONST:
            sourced.checks.append((check, None, None))


def checks_agree(tracings) -> bool:
    """Whether each of two traces' StartChecks passes on the other trace's numbers: one that took
    a number of the graph's own for a fed one (a dim equal to a stand-in) does not."""
    a, b = tracings
    for mine, other in ((a, b), (b, a)):
        try:
            run_checks([c for c in mine.checks if type(c[0]) is StartCheck], other.values)
        except OutsideTraced:
            return False
    return True


def near_stand_ins(values, ints, others) -> list:
    """Pairs of stand-in sets ({index: value}) to try, in order: the int arguments at `ints` moved
    by _NEAR from their `values`, the other numbers' stand-ins (`others`, two sets) kept. Pairs
    whose numbers are not apart, or whose ints leave int64, are left out."""
    tries = []
    for d1, d2 in _NEAR:
        pair = tuple({**o, **{k: values[k] + d for k in ints}} for o, d in zip(others, (d1, d2)))
        if all(len(set(s.values())) == len(s) and all(-2 ** 63 <= s[k] < 2 ** 63 for k in ints)
               for s in pair):
            tries.append(pair)
    return tries


def placed_outputs(gm) -> dict:
    """{output position: placeholder positions} of the graph's tensor outputs whose size, strides
    or storage offset hold an int argument's symbol (`x[:, :k]`, `x[k]`)."""
    symbols = {}
    for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        v = n.meta.get("val", n.meta.get("example_value"))
        if isinstance(v, torch.SymInt):
            for sym in v.node.expr.free_symbols:
                symbols.setdefault(sym, set()).add(i)
    if not symbols:
        return {}
    result = gm.graph.output_node().args[0]
    placed = {}
    for pos, n in enumerate(result if isinstance(result, (tuple, list)) else (result,)):
        v = n.meta.get("val", n.meta.get("example_value")) if hasattr(n, "meta") else None
        if isinstance(v, torch.Tensor) and v.layout is torch.strided:
            free = set()
            for d in (*v.shape, *v.stride(), v.storage_offset()):
                if isinstance(d, torch.SymInt):
                    free |= d.node.expr.free_symbols
            ints = {i for sym in free for i in symbols.get(sym, ())}
            if ints:
                placed[pos] = frozenset(ints)
    return placed


def outputs_follow(placed, fed_ints, recipe) -> bool:
    """Whether each output that a fed int places (placed_outputs) is made from that call's numbers:
    a view of an argument replayed with a fed number (outputs.VIEW_OF_INPUT). A program's output
    or a view traced as it stands would keep the stand-ins' shape or offset."""
    for pos, ints in placed.items():
        if ints & fed_ints and pos < len(recipe):
            kind, v = recipe[pos]
            if kind != VIEW_OF_INPUT or not count(v[1]):
                return False
    return True

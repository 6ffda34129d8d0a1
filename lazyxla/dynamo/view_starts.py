"""Tensor arguments that are views at a start the program feeds.

A training loop over a dataset on the device passes `x[i:i + 32]` to a compiled step, or its
forward saves that slice for the backward: on every call, a view of one buffer at a new start.
The program reads such an argument through its root buffer with the view traced into it, so each
start used to be a structure of its own, traced anew. Lazy mode's cut already takes a start that
has varied as a runtime scalar (ir/graph.py); where that start is an argument's own view, the
matcher reads it from the argument on every call and feeds it (matcher.VIEW_START), and checks
only the rest of the view (its op, base shape, length, step, shape and dtype) against the trace.

An argument's start is fed so only where that is all the program does with its buffer:
  - its root buffer is no other argument's (two views of one buffer stay traced as they are);
  - the program does not write it (a write goes through the root at the traced place);
  - the root's data is read by the view's first op alone (an `as_strided` of the argument reads
    the storage at the traced offset);
  - no output is rebuilt from its root with the traced chain (outputs.OutputHandler.pinned).
"""
from __future__ import annotations

from lazyxla.generations import Generations
from lazyxla.ir import buffer as buf


def read_loose(state, positions):
    """(signature, starts) of a view whose views at chain `positions` may start anywhere: per view
    its interned id (which holds its input's shape), or at those positions (Lowering, base shape,
    its arguments but the start, shape, dtype); and the starts there, in order. (None, None) where
    one of them has no start rule, or the view is none."""
    if type(state) is not buf.View:
        return None, None
    sig, starts = [], []
    for e, entry in enumerate(state.chain):
        if e in positions:
            kid = entry[5]
            hit = _LOOSE[kid] if kid is not None else None
            if hit is None:
                base = state.chain[e - 1][3] if e else state.base.node.shape
                hit = _loose(entry, base)
                if hit is None:
                    return None, None
                if kid is not None:
                    _LOOSE.put(kid, hit)
            sig.append(hit[0])
            starts.append(hit[1])
        else:
            sig.append(entry[5])
    return tuple(sig), starts


def _loose(entry, base):
    """((Lowering, base, the arguments but the start, shape, dtype), start) of a view, or None."""
    low = entry[0]
    if low.offset is None:
        return None
    try:
        start, rest = low.offset.start_of(base, entry[1])
    except Exception:  # (a view out of range: none of eager's)
        return None
    return (low, base, rest, entry[3], entry[4]), start


# A view's interned id (its op, input shape and dtype, and exact arguments) -> _loose of it: every
# call of a program fed a view's start reads it, twice (the bridge's key and the matcher)
_LOOSE = Generations(4096)


def fed_view_starts(graph, args, start, excluded) -> tuple[dict, dict]:
    """({argument j: frozenset of chain positions whose starts the program takes as parameters},
    {parameter index: (j, the position among j's fed starts)}) for the arguments that are views
    read by the program `graph` (just cut) only through their chain, whose starts it feeds;
    `start`: each argument's root data node as the trace began; `excluded`: arguments whose view
    must stay the one traced (written, or pinned by an output).

    A node reads argument j's view at chain position e when its attrs are that view's own (the
    very object: every read of the view, or of a view of it, builds its nodes from the chain),
    and so are those below it, down to j's root data."""
    if not graph.starts:
        return {}, {}
    extra = len(graph.starts)
    n_own = len(graph.params) - extra
    owners, at = {}, {}
    for j, a in enumerate(args):
        if start[j] is not None:
            owners.setdefault(id(buf.state_of(a).root), []).append(j)
    for j, a in enumerate(args):
        st = buf.state_of(a) if start[j] is not None else None
        if type(st) is buf.View and j not in excluded and len(owners[id(st.root)]) == 1:
            for e, entry in enumerate(st.chain):
                at[id(entry[1])] = (j, e)
    found = {}  # j -> [(parameter, e)], the first ops of its reads, reads per position
    for i, node in enumerate(graph.starts, n_own):
        j, e = at.get(id(node.attrs), (None, None))
        if j is None:
            continue
        chain, n = buf.state_of(args[j]).chain, node
        for d in range(e, -1, -1):
            if n.op is not chain[d][0] or n.attrs is not chain[d][1]:
                break
            first, n = n, n.inputs[0]
        else:
            if n is start[j]:
                params, firsts, per_e = found.setdefault(j, ([], set(), {}))
                params.append((i, e))
                firsts.add(first.pos + extra)  # (the start parameters come before the ops)
                per_e[e] = per_e.get(e, 0) + 1
    fed, params_at = {}, {}
    entries = graph.spec.entries
    for j, (params, firsts, per_e) in found.items():
        p = start[j].pos
        if p >= n_own or graph.params[p] is not start[j]:
            continue
        readers = {k for k in range(n_own + extra, len(entries)) if p in entries[k][1]}
        if readers != firsts or any(c != len(firsts) for c in per_e.values()):
            continue  # the root is read otherwise too, or a read keeps a start traced
        mine = sorted(per_e)
        fed[j] = frozenset(mine)
        for i, e in params:
            params_at[i] = (j, mine.index(e))
    return fed, params_at

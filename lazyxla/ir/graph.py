"""Cutting a graph out of the live recording, and its canonical key and strong hash.

`cut(roots)` walks the IR below the roots once, numbering nodes in post-order. The result holds
  - a `GraphSpec`: the program's structure only (ops, attributes, wiring, parameter shapes and
    dtypes), holding no device data, so it can be kept to recompile an evicted program;
  - the parameter leaves, in program order, whose current values are the program's inputs.
The key is the canonical text of the spec; the hash is a 128-bit BLAKE2b of key and versions, so a
hit never runs a structurally different program (operand order is part of the key).

Graphs that differ only in the starts of slices and selects (ops with `Lowering.offset`) are one
program once they have varied: the second such graph's spec takes each start that differs from
the first's as a runtime scalar parameter, which every later cut feeds, so a loop over batches of
a dataset on the device compiles two programs, not one per batch. LAZYXLA_VARYING_STARTS=0 keeps
every start in its program.

With `split`, a graph whose shapes differ from an earlier graph's only in a small part is planned
to run as a few programs, that part apart (stages.py).
"""
from __future__ import annotations

import hashlib
import os

import torch

from lazyxla.envflags import flag
from . import stages as _stages
from .node import DATA, SCALAR, Node, scalar_node


class GraphSpec:
    """entries[i] is ('param', shape, dtype) or (lowering, input indices, attrs, shape, dtype);
    outputs are entry indices. param_perms: {parameter index: perm} of the parameters fed as
    device data held transposed (Node.perm); free_outputs: the positions in `outputs` the program
    may hand back in the layout it computed them in (runtime/channels_last.py)."""
    __slots__ = ("entries", "outputs", "n_params", "key", "hash", "rng_params", "scalar_params",
                 "n_ops", "param_perms", "free_outputs", "offset_ops", "stages", "donated",
                 "param_uses")

    def __init__(self, entries, outputs, n_params, key, hash_, rng_params, scalar_params,
                 param_perms=None, free_outputs=frozenset(), offset_ops=(), donated=()):
        self.entries, self.outputs, self.n_params = entries, outputs, n_params
        self.key, self.hash, self.rng_params = key, hash_, rng_params
        self.scalar_params = scalar_params
        self.n_ops = len(entries) - n_params
        self.param_perms = param_perms or {}
        self.free_outputs = free_outputs
        # positions in the cut's op order of the ops whose starts are the last parameters
        self.offset_ops = offset_ops
        # None, or the graph's stages when a cut with `split` runs it as several programs
        # (stages.plan: per stage, the positions among the ops of its results)
        self.stages = None
        # ((parameter index, position in `outputs` of its new value), ...): the parameters whose
        # device data the caller drops once the program has run, so the executable may write its
        # outputs into their memory (donation; runtime/donation.py)
        self.donated = donated
        # per donated parameter, how many times the ops read it (the references its node holds)
        self.param_uses = _uses(entries, n_params, donated)

    def text(self) -> str:
        """Readable IR, one line per node."""
        lines = []
        for i, e in enumerate(self.entries):
            if e[0] == "param":
                lines.append(f"%{i} = param{list(e[1])} {e[2]}")
            else:
                low, ins, attrs, shape, dtype = e
                args = ", ".join(f"%{j}" for j in ins)
                lines.append(f"%{i} = {low.name}({args}) attrs={attrs!r} -> {shape} {dtype}")
        lines.append("return " + ", ".join(f"%{j}" for j in self.outputs))
        return "\n".join(lines)


class Graph:
    """`stages`: None, or (a cut with `split`) the nodes each stage's program computes and hands
    on, in the order they run; the graph's roots are among them. `starts`: the ops whose starts
    are the last parameters, in their order."""
    __slots__ = ("spec", "params", "roots", "epoch", "stages", "starts")

    def __init__(self, spec, params, roots, epoch=None, stages=None, starts=()):
        self.spec, self.params, self.roots, self.epoch = spec, params, roots, epoch
        self.stages, self.starts = stages, starts

    def computes(self, node: Node) -> bool:
        """Is `node` one of this graph's ops? Valid until the next cut."""
        return node.mark == self.epoch and _epoch == self.epoch and node.op is not DATA \
            and node.op is not SCALAR


_salt = None


def _version_salt() -> bytes:
    global _salt
    if _salt is None:
        from lazyxla import __version__
        from lazyxla.jaxenv import versions
        _salt = repr((__version__, versions(), os.environ.get("XLA_FLAGS", ""))).encode()
    return _salt


def strong_hash(key: str) -> str:
    return hashlib.blake2b(_version_salt() + key.encode(), digest_size=16).hexdigest()


# Exact structural key (a tuple, hashed and compared in C) -> GraphSpec. A hit skips building the
# spec's canonical text and its BLAKE2b hash, which cost about half of a cut.
_BY_STRUCTURE: dict = {}
_MAX_STRUCTURES = 4096
# The structure with the starts of ops with offsets left out -> (the starts of the first graph
# seen with it, the positions of the ops whose starts have varied since, the spec that takes
# those as parameters).
_BY_ABSTRACT: dict = {}


_epoch = 0  # cuts so far: a node whose `mark` is the current epoch was visited by this cut


def cut(roots: list[Node], free_outputs=frozenset(), split=False, donate=None) -> Graph:
    """Roots must be distinct, non-leaf nodes. free_outputs: positions in `roots` whose values the
    program may hand back in the layout it computed them in (GraphSpec.free_outputs). split: plan
    stages for a graph whose shapes vary in a small part (stages.py; lazy mode's syncs). donate:
    {id(device data node): position in `roots` of the value that replaces it}: data the caller
    drops once the program has run, which the program may take as donated (GraphSpec.donated)
    where it is a parameter of the same shape and dtype as its new value."""
    global _epoch
    _epoch += 1
    done, expanding = _epoch, -_epoch  # node.mark values: visited / inputs being visited
    params: list[Node] = []
    # Parameters first (in first-visit order), ops after: a stable layout for the matcher.
    order: list[Node] = []
    stack = list(reversed(roots))
    pop, push = stack.pop, stack.append
    while stack:  # iterative post-order DFS: graphs may be deeper than Python's recursion limit
        node = stack[-1]
        mark = node.mark
        if mark == done:
            pop()
            continue
        op = node.op
        if op is DATA or op is SCALAR:
            node.mark = done
            params.append(node)
            pop()
        elif mark == expanding:  # every input has been visited
            node.mark = done
            order.append(node)
            pop()
        else:
            node.mark = expanding
            for inp in reversed(node.inputs):
                if inp.mark != done:
                    push(inp)
    n_params = len(params)
    for i, p in enumerate(params):
        p.pos = i
    for i, node in enumerate(order, n_params):
        node.pos = i
    ops = []
    add = ops.append
    for node in order:
        k, ins = node.key, node.inputs
        n = len(ins)  # (most ops take one or two inputs: no list per node for those)
        wiring = (ins[0].pos,) if n == 1 else (ins[0].pos, ins[1].pos) if n == 2 else \
            tuple([x.pos for x in ins])
        add((node.op, wiring, k if k is not None else repr(node.attrs), node.shape, node.dtype))
    outputs = [r.pos for r in roots]
    donated = _donated(params, roots, donate) if donate else ()
    structure = (tuple([(p.op is SCALAR, p.rng, p.shape, p.dtype, p.perm) for p in params]),
                 tuple(ops), tuple(outputs), free_outputs, donated)
    try:
        spec = _BY_STRUCTURE.get(structure)
    except TypeError:  # an unhashable attribute: the canonical text alone keys this graph
        spec, structure = None, None
    if spec is None:
        spec = _shared_spec(structure, params, order, outputs, free_outputs) \
            if structure is not None and flag("LAZYXLA_VARYING_STARTS", True) else None
        if spec is None:  # (a shared spec is not kept by structure: each start would add one)
            spec = _make_spec(params, order, ops, outputs, free_outputs, (), donated)
            if split and structure is not None and not free_outputs and _stages.enabled():
                spec.stages = _stages.plan(structure)
            if structure is not None:
                if len(_BY_STRUCTURE) >= _MAX_STRUCTURES:
                    _BY_STRUCTURE.clear()
                _BY_STRUCTURE[structure] = spec
    starts = ()
    if spec.offset_ops:  # this graph's starts, fed as the last parameters
        starts = tuple([order[k] for k in spec.offset_ops])
        params = params + [scalar_node(node.op.offset(node)[0]) for node in starts]
    if split and spec.stages is not None:
        return Graph(spec, params, roots, done, [[order[k] for k in s] for s in spec.stages], starts)
    return Graph(spec, params, roots, done, starts=starts)


def _shared_spec(structure, params, order, outputs, free_outputs):
    """The spec this graph shares with the graphs seen that differ from it only in starts, which
    takes the starts that have varied between them as parameters; None while none has varied."""
    ops, starts = list(structure[1]), []
    for k, node in enumerate(order):
        offset = node.op.offset
        if offset is not None:
            start, low, attrs = offset(node)
            starts.append((k, start))
            ops[k] = (low, ops[k][1], attrs, ops[k][3], ops[k][4])
    if not starts:
        return None
    abstract = (structure[0], tuple(ops)) + structure[2:]
    seen = _BY_ABSTRACT.get(abstract)
    if seen is None:
        if len(_BY_ABSTRACT) >= _MAX_STRUCTURES:
            _BY_ABSTRACT.clear()
        _BY_ABSTRACT[abstract] = (tuple(s for _, s in starts), (), None, structure)
        return None
    first, varied, spec, first_structure = seen
    now = tuple(sorted(set(varied).union(k for (k, s), s0 in zip(starts, first) if s != s0)))
    if not now:  # the first graph again (its structure was dropped from _BY_STRUCTURE)
        return None
    if now != varied:
        spec = _make_spec(params, order, structure[1], outputs, free_outputs, now, structure[4])
        _BY_ABSTRACT[abstract] = (first, now, spec, first_structure)
        # the first graph's starts are fed from now on too: one program for all, and a bridge's
        # trace at them ties its starts to the numbers it feeds (dynamo/fed_starts.py)
        _BY_STRUCTURE.pop(first_structure, None)
    return spec


def _donated(params, roots, donate) -> tuple:
    """GraphSpec.donated of a cut: the parameters named in `donate` whose new value is held as
    they are (same shape and dtype, no transposed layout), so an output can take their memory."""
    out = []
    for p in params:
        k = donate.get(id(p))
        if k is not None and p.op is DATA and p.perm is None:
            r = roots[k]
            if r.shape == p.shape and r.dtype == p.dtype:
                out.append((p.pos, k))
    return tuple(out)


def _uses(entries, n_params, donated) -> dict:
    """{parameter index: how many times the ops read it} of the donated parameters."""
    uses = dict.fromkeys([i for i, _ in donated], 0)
    if uses:
        for e in entries[n_params:]:
            for j in e[1]:
                if j in uses:
                    uses[j] += 1
    return uses


def _make_spec(params, order, ops, outputs, free_outputs, varied=(), donated=()) -> GraphSpec:
    """varied: positions in `order` of the ops that take their start as a parameter, one each
    after the graph's own; donated: GraphSpec.donated."""
    entries, keyparts, rng_params, perms = [], [], [], {}
    for i, p in enumerate(params):
        kind = "S" if p.op is SCALAR else "P"
        entries.append(("param", p.shape, p.dtype))
        keyparts.append(f"{kind}{p.shape}{p.dtype}" + (f"~{p.perm}" if p.perm is not None else ""))
        if p.rng:
            rng_params.append(i)
        if p.perm is not None:
            perms[i] = p.perm
    n, extra = len(params), len(varied)
    starts = {k: n + i for i, k in enumerate(varied)}
    for _ in varied:
        entries.append(("param", (), torch.int64))
        keyparts.append(f"S(){torch.int64}")
    text_ops = []
    for k, (node, (_, ins, _, _, _)) in enumerate(zip(order, ops)):
        op, attrs = node.op, node.attrs
        if extra:
            ins = tuple([j if j < n else j + extra for j in ins])
            if k in starts:
                _, op, attrs = op.offset(node)
                ins += (starts[k],)
        entries.append((op, ins, attrs, node.shape, node.dtype))
        # shape and dtype too: a node with no inputs (ones_like) gets them from nowhere else
        text_ops.append((op.name, ins, attrs, node.shape, node.dtype))
    if extra:
        outputs = [j if j < n else j + extra for j in outputs]
    key = ";".join(keyparts) + repr(text_ops) + f"->{outputs}"  # one repr: the structure, in C
    if free_outputs:
        key += f" free{sorted(free_outputs)}"
    if donated:
        key += f" donate{list(donated)}"
    scalars = frozenset([i for i, p in enumerate(params) if p.op is SCALAR] + list(starts.values()))
    return GraphSpec(entries, outputs, n + extra, key, strong_hash(key), tuple(rng_params), scalars,
                     perms, frozenset(free_outputs), varied, donated)

"""Graphs whose shapes vary in a small part run that part apart, in programs of its own.

A loop can keep its graph's ops and wiring from step to step and still change a few shapes: a
generation loop grows `input_ids` by a token each step (and indexes them, and tests the last one
for the end token), a training loop keeps a history with `torch.cat([hist, loss[None]])`. Each
new shape is a new program, so such a loop compiled its whole step at every step.

At a cut that misses its exact structure, the graph is compared with the last graph seen with
the same ops and wiring (shapes and attributes left out). An op varies when its own shape, its
attributes or the shapes of its inputs differ from that graph's (so a loop whose first steps
vary more, a new prompt length after another, settles on the part that varies from step to
step). When the ops that vary are few (at most max(16, a quarter of the ops), with at least 16
that do not), the graph runs as a short sequence of programs, stages, each holding only ops that
vary or only ops that do not. An op's stage is the latest of its inputs' stages, one later where
it is of the other kind, so each program needs only the results of earlier ones. The stable
stages keep their structure from step to step and hit the cache; only the small varying ones
compile. Results handed from one stage to the next are device arrays (a stage boundary costs a
program launch; fusion stops there).
LAZYXLA_SPLIT_VARYING_SHAPES=0 keeps every graph one program.
"""
from __future__ import annotations

from lazyxla.envflags import flag

MAX_STAGES = 8
VARYING_MIN, VARYING_SHARE = 16, 4  # ops that vary: at most max(16, ops / 4)
STABLE_MIN = 16  # ops that do not vary: at least this many, or one program costs less

# structure with shapes and attributes left out -> each op's signature in the last graph seen
_LAST: dict = {}
_MAX_LAST = 4096


def enabled() -> bool:
    return flag("LAZYXLA_SPLIT_VARYING_SHAPES", True)


def plan(structure) -> tuple | None:
    """The stages of a graph (graph.cut's exact structure: params, ops, outputs, free outputs):
    per stage, in the order they run, the positions among the ops of the stage's results that
    later stages read or the graph returns. None: one program."""
    params, ops, outputs = structure[0], structure[1], structure[2]
    n = len(params)
    shapes = [p[2] for p in params] + [o[3] for o in ops]
    # (a node of several outputs has a shape of None and its outputs' specs in its dtype)
    shapeless = (tuple([(p[0], p[1], p[3], p[4], len(p[2])) for p in params]),
                 tuple([(o[0], o[1], o[4] if o[3] is not None else len(o[4])) for o in ops]),
                 outputs)
    signatures = tuple([(o[2], o[3], o[4] if o[3] is None else None, tuple([shapes[j] for j in o[1]]))
                        for o in ops])
    try:
        last = _LAST.get(shapeless)
    except TypeError:  # an unhashable attribute
        return None
    if last is None and len(_LAST) >= _MAX_LAST:
        _LAST.clear()
    _LAST[shapeless] = signatures
    if last is None:
        return None
    varying = [a != b for a, b in zip(signatures, last)]
    n_varying = sum(varying)
    if not n_varying or n_varying > max(VARYING_MIN, len(ops) // VARYING_SHARE) \
            or len(ops) - n_varying < STABLE_MIN:
        return None
    return _stages(ops, n, varying, outputs)


def _stages(ops, n, varying, outputs):
    stage = [0] * len(ops)
    for k, o in enumerate(ops):
        inputs = [j - n for j in o[1] if j >= n]
        if len(inputs) == 1 and ops[inputs[0]][3] is None:
            # one output of a node of several: in that node's stage, which alone computes it
            varying[k], stage[k] = varying[inputs[0]], stage[inputs[0]]
            continue
        s = 0
        for i in inputs:
            s = max(s, stage[i] + (varying[i] != varying[k]))
        stage[k] = s
    # then each op as late as its readers allow, so that an op with nothing to wait for (a
    # factory) joins the stage of its readers instead of making one of its own
    readers = [[] for _ in ops]
    for k, o in enumerate(ops):
        for j in o[1]:
            if j >= n:
                readers[j - n].append(k)
    returned = {j - n for j in outputs}
    for k in reversed(range(len(ops))):
        if k in returned or not readers[k]:
            continue
        if ops[k][3] is None:  # with its outputs, which move back to the earliest of them
            stage[k] = min(stage[r] for r in readers[k])
            for r in readers[k]:
                stage[r] = stage[k]
        else:
            stage[k] = max(stage[k], min(stage[r] - (varying[r] != varying[k]) for r in readers[k]))
    groups = sorted({(s, v) for s, v in zip(stage, varying)})
    if len(groups) < 2 or len(groups) > MAX_STAGES:
        return None
    group_of = {g: i for i, g in enumerate(groups)}
    member = [group_of[(s, v)] for s, v in zip(stage, varying)]
    results = [set() for _ in groups]
    for k, o in enumerate(ops):
        for j in o[1]:
            if j >= n and member[j - n] != member[k]:
                results[member[j - n]].add(j - n)
    for j in outputs:
        results[member[j - n]].add(j - n)
    return tuple(tuple(sorted(r)) for r in results)


def forget() -> None:
    """Forget the structures seen (for tests)."""
    _LAST.clear()

"""Scalar chains: CPU arithmetic on 0-dim tensors moved into the program it feeds.

torch.optim keeps each step count in a 0-dim CPU tensor by default (capturable=False) and derives
the bias corrections from it with a chain of CPU ops (`_foreach_pow`, `_foreach_sub_`, ...) whose
results feed only the device update. Run on the CPU between partitions, that chain costs more per
call than the program's own dispatch: about 20 us per foreach op and list. The trial run shows
which unsupported nodes form such a chain; the chain's inputs then become runtime scalars of the
program (`aten._to_copy` to the device, which a bridge trace turns into a scalar read from the CPU
tensor on every call) and the chain is recorded with the device ops around it.

A node joins the chain only if it is arithmetic on 0-dim CPU tensors alone, its results reach only
chain nodes and lowered ops (never the graph's output or a CPU op), it writes no tensor from
outside the chain (the step += 1 stays on the CPU). Partitions keep the graph's order, so a chain
node reads its CPU inputs before any CPU op that follows it writes them. The rewritten graph is
tried again; if anything in it fails to lower, the original split stands."""
from __future__ import annotations

import torch
import torch.fx

from lazyxla import metrics
from . import partition as part

_TO_DEVICE = torch.ops.aten._to_copy.default


def absorb_scalar_chains(gm, args, trial):
    """(graph module, its trial run) with the scalar chains moved to the device, or None when
    there is no chain to move or the moved graph does not lower."""
    chain = _closed_chain(gm, trial)
    if not chain:
        return None
    rewritten = _rewrite(gm, chain, trial.cpu_tensor_nodes)
    retrial = part.trial_run(rewritten, args)
    left = {n.name for n in trial.unsupported if n not in chain}
    if not {n.name for n in retrial.unsupported} <= left:
        metrics.record_event("scalar_chain_rejected", nodes=len(chain))
        return None
    metrics.record_event("scalar_chain", nodes=len(chain))
    return rewritten, retrial


def _closed_chain(gm, trial) -> set:
    unsupported = set(trial.unsupported)
    chain = set(trial.scalar_arithmetic)
    storages = trial.cpu_storages()
    changed = True
    while changed:  # removing a node can break the conditions of the nodes around it
        outside = set().union(*[s for n, s in storages.items() if n not in chain])
        keep = {n for n in chain if _joins(n, chain, unsupported, trial, outside)}
        changed, chain = keep != chain, keep
    return chain


def _joins(n, chain, unsupported, trial, outside) -> bool:
    outer = [a for a in n.all_input_nodes if a not in chain]
    if any(trial.cpu_values.get(a) and a not in trial.cpu_tensor_nodes for a in outer):
        return False  # an input holding several CPU tensors has no single device copy
    users = list(n.users)
    if any(u not in chain and (u in unsupported or u.op not in ("call_function", "call_method"))
           for u in users):
        return False  # a result would reach a CPU op or the graph's output as a device tensor
    written = trial.written.get(n, set())
    if written & outside:
        return False  # it updates state the CPU keeps (the step count itself)
    return bool(users or written)  # a node that feeds nothing would only add work


def _rewrite(gm, chain, cpu_tensor_nodes):
    """A copy of gm whose chain nodes read their outside CPU inputs through one `_to_copy` to the
    device each (placed before the first chain node that reads it); other inputs (SymInts) stay."""
    graph = torch.fx.Graph()
    env: dict = {}
    graph.output(graph.graph_copy(gm.graph, env))
    moved: dict = {}
    device = torch.device("lazyxla", 0)
    for old in gm.graph.nodes:
        if old not in chain:
            continue
        new = env[old]

        def to_device(a, new=new):
            if a in moved:
                return moved[a]
            with graph.inserting_before(new):
                moved[a] = graph.call_function(_TO_DEVICE, (a,), {"device": device})
            return moved[a]
        outer = {env[a] for a in old.all_input_nodes if a not in chain and a in cpu_tensor_nodes}
        new.args = torch.fx.node.map_arg(new.args, lambda a: to_device(a) if a in outer else a)
        new.kwargs = torch.fx.node.map_arg(new.kwargs, lambda a: to_device(a) if a in outer else a)
    rewritten = torch.fx.GraphModule(gm, graph)
    rewritten.recompile()
    return rewritten

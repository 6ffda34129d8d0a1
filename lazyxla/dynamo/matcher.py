"""The input matcher: how to rebuild a program's parameter list on every call.

Built once at extraction, by graph position: parameter i comes from call argument j (the device
data of its root buffer, or the current value of a 0-dim CPU tensor), or is a constant captured by
the trace (a scalar, or device data created inside the graph), or is an RNG seed drawn fresh on
every call. Identity is used only while extracting, never at replay, so a tensor shared between
graphs is never frozen as a constant."""
from __future__ import annotations

import torch

from lazyxla.device import rng
from lazyxla.ir import buffer as buf
from lazyxla.runtime import executor

ARG, CONST, SEED, CPU = 0, 1, 2, 3
_DATA = buf.DATA


class InputMatcher:
    __slots__ = ("plan", "tensor_positions", "arg_only")

    def __init__(self, graph, args, cpu_sources=None):
        """cpu_sources: id(scalar node) -> (node, CPU 0-dim tensor it was read from)."""
        # Every tensor argument held device data when the trace began (the bridge syncs them
        # first); an argument the graph wrote to holds it as `committed` now.
        by_node, cpu_args = {}, {}
        for j, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if a.device.type == "lazyxla":
                    root = buf.state_of(a).root
                    by_node.setdefault(id(root.committed or root.node), j)
                else:
                    cpu_args.setdefault(id(a), j)
        plan = []
        rngs = set(graph.spec.rng_params)
        cpu_sources = cpu_sources or {}
        for i, p in enumerate(graph.params):
            source = cpu_sources.get(id(p))
            if i in rngs:
                plan.append((SEED, None))
            elif id(p) in by_node:
                plan.append((ARG, by_node[id(p)]))
            elif source is not None and id(source[1]) in cpu_args:  # read again on every call
                plan.append((CPU, cpu_args[id(source[1])]))
            else:  # captured by the trace: a Python scalar of the graph, or data made inside it
                plan.append((CONST, p.data))
        self.plan = plan
        self.tensor_positions = sorted({j for kind, j in plan if kind == ARG})
        # The common case, every parameter a call argument: feed straight from those positions.
        self.arg_only = tuple(j for _, j in plan) if all(k == ARG for k, _ in plan) else None

    def __call__(self, args) -> list:
        only = self.arg_only
        if only is not None:
            feed = []
            for j in only:
                root = args[j].untyped_storage()._lazyxla.root
                if root.node.op is not _DATA:
                    self.sync_inputs(args)
                feed.append(root.node.data)
            return feed
        feed = []
        for kind, v in self.plan:
            if kind == ARG:
                root = args[v].untyped_storage()._lazyxla.root
                if root.node.op is not _DATA:
                    self.sync_inputs(args)
                feed.append(root.node.data)
            elif kind == CONST:
                feed.append(v)
            elif kind == CPU:  # scalars: the Program packs and casts them
                feed.append(args[v].item())
            else:
                feed.append(rng.next_seed())
        return feed

    def sync_inputs(self, args) -> None:
        """Inputs that still carry pending IR are executed first (DynamoSyncInputExecuteTime)."""
        pending = [buf.state_of(args[j]).root for j in self.tensor_positions
                   if buf.state_of(args[j]).root.node.op is not buf.DATA]
        if pending:
            from lazyxla import metrics
            with metrics.timed("DynamoSyncInputExecuteTime"):
                executor.sync_buffers(pending)

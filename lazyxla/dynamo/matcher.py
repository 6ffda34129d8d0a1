"""The input matcher: how to rebuild a program's parameter list on every call.

Built once at extraction, by graph position: parameter i comes from call argument j (the device
data of its root buffer, or the current value of a 0-dim CPU tensor), or is a number the bridge
computes on every call from the graph's `.item()` inputs and int arguments (input_items.py), or is
a constant captured by the trace (a scalar, or device data created inside the graph), or is an RNG
seed drawn fresh on every call. Identity is used only while extracting, never at replay, so a
tensor shared between graphs is never frozen as a constant.

A program reads each argument through its root buffer, with the argument's view chain (a slice,
a transpose) and its aliasing with other arguments traced into it. Dynamo's guards do not see
either, so the matcher checks them on every call and raises InputStructureChanged when they
differ (`batch[4:8]` after `batch[0:4]` of the same buffer; two arguments that now share one);
the bridge then extracts a program for the new structure. A program that takes a view's start as
a parameter (the second start seen) is fed it from the argument instead (view_starts.py)."""
from __future__ import annotations

import time

import numpy as np
import torch

from lazyxla import metrics
from lazyxla.device import rng
from lazyxla.device.dispatch import LAZYXLA_DEVICE
from lazyxla.ir import buffer as buf
from lazyxla.ir.node import Node
from lazyxla.jaxenv import device_scalar, relayout
from lazyxla.runtime import donation, executor
from lazyxla.runtime.compiler import scalar_layout
from .view_starts import fed_view_starts, read_loose

ARG, CONST, SEED, CPU, FED, ARG_HELD, VIEW_START = 0, 1, 2, 3, 4, 5, 6
_now = time.perf_counter_ns  # (metrics are in nanoseconds, as torch_xla's)
_increment_version = torch._C._increment_version  # (takes a list of tensors)
_DATA, _Buffer, _View, _Node = buf.DATA, buf.Buffer, buf.View, Node


class InputStructureChanged(Exception):
    """A tensor argument is another view of its buffer, or aliases other arguments differently,
    than when the program was traced."""


def view_signature(state) -> tuple:
    """The interned ids of a view's ops from its root buffer; () for a whole buffer."""
    return () if type(state) is _Buffer else tuple([e[5] for e in state.chain])


class Structure(tuple):
    """Per lazyxla tensor argument: (position, its view signature, the first argument sharing its
    root buffer). Part of a bridge's key once views or aliasing have varied."""

    def __repr__(self):
        views = [f"arg {j}: {'view ' + str(list(sig)) if sig else 'buffer'}"
                 + (f" sharing arg {j0}'s buffer" if j0 != j else "") for j, sig, j0 in self]
        return "tensor arguments (" + ", ".join(views) + ")"


def structure(args, loose=None) -> Structure:
    """loose: {argument: chain positions} of views whose starts a program feeds: there the
    signature leaves the start out (view_starts.read_loose)."""
    first, out = {}, []
    for j, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.device == LAZYXLA_DEVICE:
            st = buf.state_of(a)
            sig = read_loose(st, loose[j])[0] if loose and j in loose else None
            out.append((j, view_signature(st) if sig is None else sig, first.setdefault(id(st.root), j)))
    return Structure(out)


class InputMatcher:
    __slots__ = ("plan", "gather", "reads", "checked", "views", "shared", "distinct", "donated",
                 "writes", "written", "loose", "loose_args", "template", "arg_feeds", "other_feeds")

    def __init__(self, graph, args, start, cpu_sources=None, mutated=(), pinned=()):
        """start: each argument's root data node as the trace began (None for non-lazyxla ones);
        cpu_sources: id(scalar node) -> (node, CPU 0-dim tensor it was read from, or the index
        of the fed number it stands for); mutated: (argument, output slot, shape, dtype) of each
        argument the program writes (then arguments that were apart must stay apart); pinned:
        arguments whose views must stay the ones traced (outputs.OutputHandler.pinned)."""
        written = {j for j, *_ in mutated}
        # arguments that are views whose starts the program takes (view_starts.py)
        self.loose_args, view_params = fed_view_starts(graph, args, start, written | set(pinned))
        traced = structure(args, self.loose_args)
        views = {j: sig for j, sig, _ in traced if sig}
        shared = [(j, j0) for j, _, j0 in traced if j0 != j]
        by_node, cpu_args = {}, {}
        for j, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if a.device.type == "lazyxla":
                    by_node.setdefault(id(start[j]), j)
                else:
                    cpu_args.setdefault(id(a), j)
        plan = []
        rngs = set(graph.spec.rng_params)
        cpu_sources = cpu_sources or {}
        for i, p in enumerate(graph.params):
            source = cpu_sources.get(id(p))
            if i in rngs:
                plan.append((SEED, None))
            elif id(p) in by_node:  # (held transposed when traced: the program takes it so)
                plan.append((ARG, by_node[id(p)]) if p.perm is None else
                            (ARG_HELD, (by_node[id(p)], p.perm)))
            elif source is not None and type(source[1]) is int:  # computed on every call
                plan.append((FED, source[1]))
            elif i in view_params:  # an argument's view start, read from it on every call
                plan.append((VIEW_START, view_params[i]))
            elif source is not None and id(source[1]) in cpu_args:  # read again on every call
                plan.append((CPU, cpu_args[id(source[1])]))
            else:  # captured by the trace: a Python scalar of the graph, or data made inside it
                plan.append((CONST, p.data))
        # Each call reads the lazy state of the arguments in `gather` once; everything after works
        # on their root buffers by position in it: the plan's ARG entries, the structure checks,
        # the donation guard and the write-back of updated arguments. The structure is checked
        # (every lazyxla argument gathered) where views or shared buffers were traced, or where
        # the program writes an argument; else only the arguments read, each a whole buffer.
        read = sorted({v if kind == ARG else v[0] for kind, v in plan if kind in (ARG, ARG_HELD)})
        self.checked = bool(views or shared or written)
        gather = tuple(j for j, _, _ in traced) if self.checked else tuple(read)
        k_of = {j: k for k, j in enumerate(gather)}
        self.gather, self.reads = gather, tuple(k_of[j] for j in read)
        self.views = {k_of[j]: sig for j, sig in views.items()}
        self.loose = {k_of[j]: e for j, e in self.loose_args.items()}
        self.shared = tuple((k_of[j], k_of[j0]) for j, j0 in shared)
        self.distinct = bool(written)
        # The executable's arguments: one per parameter, a runtime scalar as a 0-dim array
        # (compiler.scalar_layout). The graph's own Python scalars (lr, betas) never change for a
        # program: they are put on the device once, here. A CPU tensor's value is read per call.
        for i, dt in scalar_layout(graph.spec):
            kind, v = plan[i]
            plan[i] = (kind, device_scalar(v, dt) if kind == CONST else
                       (v, dt) if kind in (CPU, FED, VIEW_START) else dt)
        self.plan = tuple((kind, k_of[v]) if kind == ARG else
                          (kind, (k_of[v[0]], v[1])) if kind == ARG_HELD else
                          (kind, ((k_of[v[0][0]], v[0][1]), v[1])) if kind == VIEW_START else (kind, v)
                          for kind, v in plan)
        # What _feed does with the plan on every call: a copy of `template` (the constants in
        # place), then each ARG's data by (parameter index, position in `gather`), then the rest.
        self.template = [v if kind == CONST else None for kind, v in self.plan]
        self.arg_feeds = tuple((i, v) for i, (kind, v) in enumerate(self.plan) if kind == ARG)
        self.other_feeds = tuple((i, kind, v) for i, (kind, v) in enumerate(self.plan)
                                 if kind != ARG and kind != CONST)
        # (parameter index, position in `gather` or None) of each parameter the program takes as
        # donated: a written argument's data, which the bridge replaces by the program's output
        # (runtime/donation.py); None: always fed as a copy (data another argument reads too)
        self.donated = tuple((i, k_of[plan[i][1]] if plan[i][0] == ARG and plan[i][1] in written else None)
                             for i, _ in graph.spec.donated)
        self.writes = tuple((k_of[j], slot, shape, dtype) for j, slot, shape, dtype in mutated)
        self.written = tuple(j for j, *_ in mutated)  # (their version counters are bumped)

    def __call__(self, args, fed=()) -> tuple:
        """(the executable's arguments for this call, the root buffers of the arguments in
        `gather`); fed: this call's values of the numbers the bridge feeds (input_items.py)."""
        states = [args[j].untyped_storage()._lazyxla for j in self.gather]
        starts = {}
        if self.checked:
            roots = self.check_structure(states, starts)
        elif _View in set(map(type, states)):
            k = next(k for k, st in enumerate(states) if type(st) is _View)
            raise InputStructureChanged(f"an argument is a view now (argument {self.gather[k]})")
        else:  # the common case: every argument a whole buffer
            roots = states
        return self._feed(args, roots, fed, starts), roots

    def guard_donated(self, roots, feed) -> None:
        """For an executable that takes the donated parameters as such (compiler.Program.donated;
        called after __call__, whose variables no longer hold the data): each is fed as a copy
        where anything but its argument's buffer still holds that data (runtime/donation.py)."""
        metrics.counter_inc("DonatedInput", len(self.donated))
        for i, k in self.donated:
            if k is None:
                feed[i] = donation.copy(feed[i])
            else:
                donation.guard_argument(roots[k], feed, i)

    def write_back(self, args, roots, results) -> None:
        """The written arguments' new values: in-place updates, applied exactly once. Each written
        argument's version counter is bumped, as eager's in-place ops bump it (autograd then sees
        an optimizer step between a forward that saved a parameter and its backward)."""
        for k, slot, shape, dtype in self.writes:  # (Buffer.write, inline: data, never pending)
            root = roots[k]
            root.node = root.committed = _Node(_DATA, (), None, shape, dtype, data=results[slot])
        _increment_version([args[j] for j in self.written])

    def _feed(self, args, roots, fed, starts) -> list:
        """The executable's arguments for this call; starts: {gathered argument: the starts of
        its views that the program takes} (check_structure)."""
        feed = self.template.copy()
        for i, k in self.arg_feeds:  # (inline: the common kind; the optimizer's step feeds dozens)
            node = roots[k].node
            if node.op is not _DATA:
                self.sync_inputs(roots)
                node = roots[k].node
            feed[i] = node.data if node.perm is None else relayout(node.data, node.perm, None)
        for i, kind, v in self.other_feeds:
            if kind == ARG_HELD:  # device data the program takes transposed by `perm`
                k, perm = v
                node = roots[k].node
                if node.op is not _DATA:
                    self.sync_inputs(roots)
                    node = roots[k].node
                feed[i] = relayout(node.data, node.perm, perm)
            elif kind == CPU:  # a 0-dim CPU tensor's current value (a step count: new every
                j, dt = v      # call, so the executable's own transfer beats a kept array)
                feed[i] = np.asarray(args[j].item(), dt)
            elif kind == FED:
                k, dt = v
                feed[i] = np.asarray(fed[k], dt)
            elif kind == VIEW_START:
                (k, e), dt = v
                feed[i] = np.asarray(starts[k][e], dt)
            else:  # SEED: fresh every call
                feed[i] = np.asarray(rng.next_seed(), v)
        return feed

    def check_structure(self, states, starts) -> list:
        """The root buffers of `states`, once the arguments are the views, and share buffers, as
        traced (the views whose starts the program takes at any start: those go in `starts`)."""
        views, loose = self.views, self.loose
        if not views and not loose and _View not in set(map(type, states)):
            roots = states  # every argument a whole buffer, as traced: its own root
        else:
            for k, st in enumerate(states):
                if k in loose:
                    sig, starts[k] = read_loose(st, loose[k])
                    if sig != views[k]:
                        raise InputStructureChanged(f"argument {self.gather[k]} is another view of its buffer")
                elif (type(st) is not _Buffer or k in views) and view_signature(st) != views.get(k, ()):
                    raise InputStructureChanged(f"argument {self.gather[k]} is another view of its buffer")
            roots = [st.root for st in states]
        for k, k0 in self.shared:
            if roots[k] is not roots[k0]:
                raise InputStructureChanged(f"arguments {self.gather[k0]} and {self.gather[k]} no "
                                            "longer share a buffer")
        if self.distinct:
            reads = self.reads
            # (reads is a sorted subset of the gathered positions: all of them when as long)
            apart = len(set(map(id, roots))) if len(reads) == len(roots) else len({id(roots[k]) for k in reads})
            if apart != len(reads):
                raise InputStructureChanged("arguments that were apart share a buffer now")
        return roots

    def sync_inputs(self, roots) -> None:
        """Inputs that still carry pending IR are executed first (DynamoSyncInputExecuteTime):
        every backward of a compiled graph is fed autograd's pending grad seed, ones_like(loss)."""
        pending = [roots[k] for k in self.reads if roots[k].node.op is not _DATA]
        if pending:
            t0 = _now()
            executor.sync_buffers(pending)
            metrics.metric_add("DynamoSyncInputExecuteTime", _now() - t0)

"""Unsupported ops inside a compiled region.

Statically: a graph whose every call is an aten op on lazyxla tensors needs no trial run (B6); an
op that falls back or reads a value all the same stops the bridge's trace (FallbackInTrace), and the
trial run follows.
Otherwise the FX graph is interpreted node by node on stand-ins of the inputs; a node that moved a
fallback counter, read a device value into Python (a program would replay what it read), or whose
arguments or results are not all lazyxla tensors, is unsupported. The runs of supported nodes
between unsupported ones become fused submodules (PyTorch's fuse_by_partitions), each compiled by
its own Bridge; unsupported nodes run between them (through the CPU fallback, or in lazy mode),
in their original order. The counters are saved before the trial run and restored after it."""
from __future__ import annotations

import operator

import torch
import torch.fx
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from lazyxla import metrics
from lazyxla.device.dispatch import is_cpu_scalar
from lazyxla.ir import buffer as buf
from lazyxla.lowering.registry import LOWERINGS, VIEWS, functional_variant
from lazyxla.runtime import executor
from .input_items import is_float_of_read_only_inputs, is_user_op

_ALWAYS_OK = {operator.getitem}


def statically_supported(node: torch.fx.Node) -> bool:
    if node.op in ("placeholder", "get_attr", "output"):
        return True
    if node.op != "call_function":
        return False  # a method or module call: only the trial run can tell
    val = node.meta.get("val")
    if any(t.device.type != "lazyxla" for t in _tensors(val)):
        return False  # a host copy (`.cpu()`) or CPU arithmetic: only the trial run can place it
    t = node.target
    if t in _ALWAYS_OK:
        return True
    if not isinstance(t, torch._ops.OpOverload):
        return False
    if t in LOWERINGS or t in VIEWS:
        return True
    f = functional_variant(t)
    if f is not None and f in LOWERINGS:
        return True
    # Any other aten op on lazyxla tensors alone (split, detach, _safe_softmax: PyTorch's
    # composite kernels, or decompositions, into lowered ops). Where one would fall back or read a
    # value for these arguments, the bridge's trace raises FallbackInTrace before anything runs,
    # and the backend makes the trial run then.
    inputs = [n.meta.get("val", _NO_VALUE) for n in node.all_input_nodes]
    return "val" in node.meta and _NO_VALUE not in inputs and all(t.device.type == "lazyxla" for t in _tensors(inputs))


def all_statically_supported(gm, args=()) -> bool:
    """Every node lowers, and every tensor input is on lazyxla (a CPU scalar input may feed CPU
    ops, which only the trial run can tell apart)."""
    if any(isinstance(a, torch.Tensor) and a.device.type != "lazyxla" for a in args):
        return False
    return all(statically_supported(n) for n in gm.graph.nodes)


_NO_VALUE = object()  # an FX node without an example value: only the trial run can tell


def _tensors(tree) -> list:
    return [x for x in torch.utils._pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _lazy_node_ok(args, result) -> bool:
    """Results all on lazyxla; arguments on lazyxla, or 0-dim CPU tensors (runtime scalars of
    the program, as an optimizer's step count) that the op reads without writing."""
    ins, outs = _tensors(args), _tensors(result)
    if any(t.device.type != "lazyxla" for t in outs):
        return False
    others = [t for t in ins if t.device.type != "lazyxla"]
    if not others:  # lazyxla tensors only, or no tensors at all
        return True
    if not all(is_cpu_scalar(t) for t in others):
        return False
    return len(others) < len(ins) or bool(outs)  # CPU-only arithmetic stays on the CPU


class _Collector(torch.fx.Interpreter):
    """The trial run. Besides the unsupported nodes it keeps, for the scalar-chain pass
    (absorb.py), each node's CPU tensor values (held, so their storages stay distinct), the
    storages of CPU tensors each node wrote, and which nodes are arithmetic on 0-dim CPU tensors
    only."""

    def __init__(self, gm):
        super().__init__(gm)
        self.unsupported: list[torch.fx.Node] = []
        self.attrs: dict = {}
        self.cpu_values: dict[torch.fx.Node, list] = {}
        self.cpu_tensor_nodes: set[torch.fx.Node] = set()  # value: one CPU tensor
        self.written: dict[torch.fx.Node, set] = {}
        self.scalar_arithmetic: set[torch.fx.Node] = set()

    def get_attr(self, target, args, kwargs):
        # Dynamo lifts module state (parameters, optimizer state) into attributes: stand in for
        # them too, once per attribute so that aliases stay aliases.
        if target not in self.attrs:
            self.attrs[target] = _stand_in(super().get_attr(target, args, kwargs))
        return self.attrs[target]

    def run_node(self, n):
        if n.op not in ("call_function", "call_method", "call_module"):
            return self._keep(n, super().run_node(n))
        before, reads = _fallback_counts(), _host_reads()
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        cpu_args = _cpu((args, kwargs))
        cpu_versions = [t._version for t in cpu_args]
        result = self._keep(n, super().run_node(n))
        # A node that read a device value into Python (a while_loop's condition; a custom op
        # whose Python kernel calls .tolist()) would replay the choice it made while traced: it
        # runs outside the program, on every call.
        fell_back = _fallback_counts() != before or _host_reads() != reads
        self.written[n] = {t.untyped_storage().data_ptr() for t, v in zip(cpu_args, cpu_versions)
                           if t._version != v}
        if is_input_item(n):  # a float Dynamo passed as a 0-dim CPU tensor: keyed by value
            return result
        # A user's op (torch.library) given a CPU tensor: its Python kernel may read the value
        # (`s.item()`), which no device read shows; traced, it would keep the trial's value.
        user_cpu = bool(cpu_args) and n.op == "call_function" and is_user_op(n.target)
        if fell_back or user_cpu or self.written[n] or not _lazy_node_ok((args, kwargs), result):
            self.unsupported.append(n)
            ts = _tensors((args, kwargs, result))
            if not fell_back and ts and all(is_cpu_scalar(t) for t in ts):
                self.scalar_arithmetic.add(n)
        return result

    def cpu_storages(self) -> dict:
        """node -> the storages (data pointers) of the CPU tensors its value holds: what
        `written` is compared with."""
        return {n: {t.untyped_storage().data_ptr() for t in ts} for n, ts in self.cpu_values.items()}

    def _keep(self, n, result):
        self.cpu_values[n] = _cpu(result)
        if isinstance(result, torch.Tensor) and result.device.type == "cpu":
            self.cpu_tensor_nodes.add(n)
        return result


def _cpu(tree) -> list:
    return [t for t in _tensors(tree) if t.device.type == "cpu"]


def is_input_item(n) -> bool:
    """`x.item()` of a graph input: under dynamic=True Dynamo passes Python floats (a LayerNorm's
    eps) as 0-dim CPU tensors and reads them with .item(). The bridge keys its programs by such
    inputs' values, so the value is a constant of each program."""
    return (n.op == "call_method" and n.target == "item" and len(n.args) == 1
            and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder")


def _host_reads() -> int:
    """Device values read to the host so far (.item(), .tolist(), .cpu(), a CPU fallback's inputs)."""
    return metrics.metric_count("TransferFromDeviceTime")


def _fallback_counts():
    return {k: metrics.counter_value(k) for k in metrics.counter_names() if k.startswith("aten::")}


def _stand_in(a):
    """A tensor with the same current value that shares no state with `a` (device data is
    immutable, so sharing the data node is a zero-copy copy). CPU tensors are cloned: the trial
    must not advance, say, an optimizer's step count that the real call advances again."""
    if isinstance(a, torch.Tensor):
        if a.device.type == "lazyxla":
            return buf.wrap_node(buf.state_of(a).read())
        c = a.detach().clone()
        return c.requires_grad_() if a.requires_grad else c
    return a


def find_unsupported(gm, args) -> list[torch.fx.Node]:
    return trial_run(gm, args).unsupported


def trial_run(gm, args) -> _Collector:
    from lazyxla.device import rng
    saved = metrics.snapshot()
    try:
        with executor.undone_recording(), rng.drawn_apart():
            collector = _Collector(gm)
            collector.run(*[_stand_in(a) for a in args])
            return collector
    finally:
        metrics.restore(saved)
        metrics.counter_inc("DynamoTrialRun")  # (after the restore, which would undo it)


def describe(nodes) -> str:
    lines = []
    for n in nodes:
        trace = (n.meta.get("stack_trace") or "").strip().splitlines()
        where = trace[-2].strip() if len(trace) >= 2 else "<unknown source line>"
        lines.append(f"  {n.name}: {n.target}  ({where})")
    return "\n".join(lines)


def partition(gm, unsupported, make_bridge, trial=None):
    """Fuse each run of supported nodes into a submodule and replace it by a compiled Bridge. A run
    is consecutive in graph order and never spans an unsupported node: a fused submodule runs where
    its last node stood, so spanning one would move the run's reads and writes across it (an
    in-place update and a later read of the same tensor would swap). PyTorch's
    CapabilityBasedPartitioner follows data edges only, which do not show such orderings. With
    the graph's trial run (`trial`), CPU updates that split runs for no reason move first."""
    if trial is not None:
        _hoist_cpu_updates(gm, trial)
    bad = {n.name for n in unsupported}
    runs, run = [], {}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            continue  # reads of inputs and attributes: neither part of a run nor a break
        if _unpacks_outside_node(node, bad):  # unpacks an outside node's tuple: outside too, so that
            bad.add(node.name)           # a Bridge takes tensors, never a tuple of them
        if node.op in ("call_function", "call_method") and node.name not in bad:
            run[node] = None
        elif run:
            runs.append(run)
            run = {}
    runs = _floats_into_runs(gm, runs)
    _attributes_into_runs(gm, runs)
    fused = fuse_by_partitions(gm, runs, prefix="fused_") if runs else gm
    n = 0
    for node in fused.graph.nodes:
        if node.op == "call_module" and node.name.startswith("fused_"):
            sub = getattr(fused, node.name)
            setattr(fused, node.name, _BridgeModule(make_bridge(sub, node.name)))
            n += 1
    fused.recompile()
    metrics.record_event("partition", partitions=n, unsupported=[str(u.target) for u in unsupported])
    return fused, n


def _hoist_cpu_updates(gm, trial) -> None:
    """Move each update of 0-dim CPU tensors that stays on the CPU (a for-loop optimizer's
    `step_t += 1`, one per parameter between its device ops) up, past the supported nodes before
    it, to just after the unsupported node or input before those: the runs it split become one
    program (a for-loop AdamW step: 8 programs a step -> 1). It stops at a node it reads, and at one
    that reads a CPU tensor it writes (which would then see the new value); supported nodes write
    no CPU tensor (trial run), and the unsupported ones keep their order."""
    bad = set(trial.unsupported)
    movable = [n for n in gm.graph.nodes if n in trial.scalar_arithmetic]
    if not movable:
        return
    storages = trial.cpu_storages()
    for u in movable:
        written, crossed = trial.written.get(u, set()), {}
        # (the attributes it reads move with it: a lookup, which no node in between changes)
        inputs = {a for a in u.all_input_nodes if a.op != "get_attr"}
        p = u.prev
        while (p.op in ("call_function", "call_method", "get_attr") and p not in bad
               and p not in inputs
               and not any(storages.get(a, set()) & written for a in p.all_input_nodes)):
            crossed[p] = None
            p = p.prev
        if crossed:  # after p, the node it stopped at: its get_attr inputs crossed, then itself
            for a in [a for a in u.all_input_nodes if a.op == "get_attr" and a in crossed] + [u]:
                p.append(a)
                p = a


def _unpacks_outside_node(node, bad) -> bool:
    return (node.op == "call_function" and node.target is operator.getitem
            and isinstance(node.args[0], torch.fx.Node) and node.args[0].name in bad)


def _floats_into_runs(gm, runs) -> list:
    """A float read from an input the graph only reads (`lr.item()`), or arithmetic on such
    floats, that another run uses is computed again inside that run: its Bridge then reads the
    input and feeds the float on every call (input_items.py), where taken as an argument it would
    be keyed by value (an optimizer step re-extracted for every new learning rate). Originals left
    unused go."""
    run_of = {node: i for i, run in enumerate(runs) for node in run}
    moved = False
    for i, run in enumerate(runs):
        copies: dict = {}
        for node in list(run):
            for a in node.all_input_nodes:
                if run_of.get(a) != i and is_float_of_read_only_inputs(a):
                    node.replace_input_with(a, _copy_float(gm.graph, a, node, copies))
                    moved = True
        for c in copies.values():
            run[c] = None
    if not moved:
        return runs
    for node in reversed(list(gm.graph.nodes)):
        if node in run_of and not node.users and is_float_of_read_only_inputs(node):
            del runs[run_of[node]][node]
            gm.graph.erase_node(node)
    return [run for run in runs if run]


def _copy_float(graph, node, before, copies):
    if node not in copies:
        args = torch.fx.node.map_arg(node.args, lambda a: _copy_float(graph, a, before, copies)
                                     if is_float_of_read_only_inputs(a) else a)
        with graph.inserting_before(before):
            copies[node] = graph.create_node(node.op, node.target, args, node.kwargs)
        copies[node].meta = dict(node.meta)
    return copies[node]


def _attributes_into_runs(gm, runs) -> None:
    """An attribute read only by one run joins it: the Bridge then holds the tensor (as it holds
    the attributes of a graph it compiles whole) instead of the partitioned graph looking it up
    through nn.Module on every call (an optimizer step reads dozens: its state and parameters).
    Each run stays in graph order: fuse_by_partitions orders a run's nodes by a topological sort
    that breaks ties by position in the run, and data edges do not show in-place updates (an
    attribute appended last delayed its readers: `p.add_(buf)` moved before `buf.addcdiv_(...)`)."""
    run_of = {node: i for i, run in enumerate(runs) for node in run}
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node.users:
            owners = {run_of.get(u) for u in node.users}
            if len(owners) == 1 and None not in owners:
                runs[owners.pop()][node] = None
    position = {node: i for i, node in enumerate(gm.graph.nodes)}
    for i, run in enumerate(runs):
        runs[i] = dict.fromkeys(sorted(run, key=position.__getitem__))


class _BridgeModule(torch.nn.Module):
    def __init__(self, bridge):
        super().__init__()
        self.bridge = bridge

    def forward(self, *args):
        out = self.bridge(*args)
        return out  # fused submodules return a tuple (or a single value) like the original

"""The bridge: extract an FX graph into one cached XLA program, then replay it by hash.

Extraction (once per distinct tuple of non-tensor arguments): sync pending work, call the FX
module on the caller's real lazyxla tensors so that it only records IR, cut the graph of its
outputs (plus inputs it mutated), warm-up-compile it without executing, and undo the trace by
clearing the pending IR: every buffer reverts to the device data it last held, which restores
mutated inputs without cloning any of them. What survives is the hash, an InputMatcher and an
OutputHandler. Every later call feeds the executable directly and never traces.
"""
from __future__ import annotations

import logging
import threading

import torch

from lazyxla import envflags, metrics
from lazyxla.device import dispatch, rng
from lazyxla.generations import Generations
from lazyxla.ir import buffer as buf
from lazyxla.ir.graph import cut
from lazyxla.runtime import donation, executor
from . import fed_starts
from . import input_items as items
from .matcher import InputMatcher, InputStructureChanged, structure
from .outputs import OutputHandler
from .partition import is_input_item

log = logging.getLogger("lazyxla.dynamo")
_counters = metrics._counters  # the hot path bumps RunCachedGraph without a call
_runtime_lock = buf.RUNTIME_LOCK


def debug_enabled() -> bool:
    return envflags.flag("LAZYXLA_DYNAMO_DEBUG", False)


class Extracted:
    """One traced program: replay state for one key of non-tensor arguments."""
    __slots__ = ("hash", "matcher", "outputs", "mutated", "container", "structure", "checks",
                 "loose_structure", "spec")

    def __init__(self, h, matcher, outputs, mutated, container, structure, loose_structure=None,
                 spec=None):
        self.checks = ()  # value checks to run on fed numbers (input_items.run_checks)
        self.hash, self.matcher, self.outputs, self.mutated = h, matcher, outputs, mutated
        # the program's graph, held: the cache keeps a bounded number of evicted programs' graphs,
        # and a compiled function used again after many others found neither (KeyError)
        self.spec = spec
        self.container = container  # None for a single output, else tuple or list
        self.structure = structure  # views and aliasing of the tensor arguments it was traced on
        # the same with the starts it feeds left out (view_starts.py), where it feeds any
        self.loose_structure = loose_structure


def _key(args, _Tensor=torch.Tensor):
    return tuple([a for a in args if not isinstance(a, _Tensor)])


def _placeholder_values(gm) -> list:
    return [n.meta.get("val", n.meta.get("example_value")) for n in gm.graph.nodes
            if n.op == "placeholder"]


def _int_inputs(gm) -> tuple:
    """Positions of int arguments (SymInt placeholders: Dynamo passes an int that changed between
    calls so) that are not a tensor argument's size: those are keyed by the shapes anyway."""
    vals = _placeholder_values(gm)
    sizes = set()
    for v in vals:
        if isinstance(v, torch.Tensor):
            for d in v.shape:
                if isinstance(d, torch.SymInt):
                    sizes |= d.node.expr.free_symbols
    return tuple(i for i, v in enumerate(vals) if isinstance(v, torch.SymInt)
                 and not v.node.expr.free_symbols & sizes)


def _symbolic_inputs(gm) -> tuple:
    """Positions of placeholders whose example value has a symbolic or unknown shape."""
    out = []
    for i, val in enumerate(_placeholder_values(gm)):
        if isinstance(val, torch.Tensor):
            if any(not isinstance(d, int) for d in val.shape):
                out.append(i)
        elif val is None:
            out.append(i)  # no metadata: a tensor's shape may vary (non-tensors are keyed anyway)
    return tuple(out)


def _attribute_tensors(gm) -> tuple:
    """The lazyxla tensors behind the graph's get_attr nodes, in graph order."""
    out = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            obj = gm
            for part in node.target.split("."):
                obj = getattr(obj, part)
            if _is_lazy(obj) and not any(obj is o for o in out):
                out.append(obj)
    return tuple(out)


def _is_lazy(a) -> bool:
    return isinstance(a, torch.Tensor) and a.device.type == "lazyxla"


def extract(gm, args, name="graph", attrs=(), warm_up=True, dynamic=False) -> Extracted:
    """Trace `gm` on `args` through the lazy runtime, compile without running, undo the trace.
    `attrs`: the lazyxla tensors the graph reads as attributes (Dynamo lifts optimizer state so);
    they are inputs like the arguments, following them in the matcher's and mutations' numbering.
    `warm_up=False`: remember the program, compile it at its first call (a trace with stand-ins,
    which may not be the program the bridge keeps). `dynamic`: the graph has symbolic input shapes,
    so its program is a shape variant from the first (compiled quick: runtime/tiering.py)."""
    metrics.counter_inc("DynamoExtractCompiledGraph")
    # the trace's IR is dropped at the end (mutated inputs revert to their data); what was pending
    # is synced first, so that no user's work goes with it
    with executor.undone_recording(), rng.drawn_apart():
        return _traced(gm, args, name, attrs, warm_up, dynamic)


def _traced(gm, args, name, attrs, warm_up, dynamic) -> Extracted:
    call_args, args = args, tuple(args) + tuple(attrs)
    for a in args:
        cpu_ok = isinstance(a, torch.Tensor) and dispatch.is_cpu_scalar(a) and not a.requires_grad
        if isinstance(a, torch.Tensor) and not _is_lazy(a) and not cpu_ok:
            if dispatch.is_cpu_scalar(a):
                raise RuntimeError("lazyxla bridge: a 0-dim CPU tensor that requires grad is a graph "
                                   "input; its gradient would be computed on the device: move it "
                                   "to lazyxla.device()")
            raise RuntimeError(f"lazyxla bridge: graph input on {a.device}; move the model and its "
                               "inputs to lazyxla.device() (only 0-dim CPU tensors may stay)")
    roots_of_args = {id(buf.state_of(a).root): j for j, a in enumerate(args) if _is_lazy(a)}
    # Each argument's device data as the trace begins: what the program's parameters are, and
    # what tells a write (even one of another input's data: x.copy_(y)) from no write.
    start = [buf.state_of(a).root.node if _is_lazy(a) else None for a in args]
    _read_from_roots(args)
    dispatch.BUDGET.suspended += 1  # a trace must never execute
    saved = dispatch.CPU_SCALAR_SOURCES, dispatch.TRACER
    sources: dict = {}
    dispatch.CPU_SCALAR_SOURCES, dispatch.TRACER = sources, threading.get_ident()
    try:
        # (a trace with stand-ins calls forward itself: a stand-in out of range is no error of the
        # user's, which FX's module call would print with the graph's code)
        outs = gm.forward(*call_args) if dispatch.SOURCED_NUMBERS is not None else gm(*call_args)
        container = type(outs) if isinstance(outs, (tuple, list)) else None
        outs = list(outs) if container else [outs]
        handler = OutputHandler(outs, args, roots_of_args, {id(n) for n in start if n is not None})
        # Inputs the graph wrote to: their root buffers carry a pending value now.
        mutated, seen = [], set()
        for j, a in enumerate(args):
            if _is_lazy(a):
                root = buf.state_of(a).root
                if root.node is not start[j] and id(root) not in seen:
                    seen.add(id(root))
                    mutated.append((j, root.node))
        roots = list(handler.roots)
        mut_slots = []  # (argument, program output, its shape and dtype)
        for j, node in mutated:
            if node not in roots:
                roots.append(node)
            mut_slots.append((j, roots.index(node), tuple(node.shape), node.dtype))
        if roots:
            # A computed output may come back as the program computed it (a channels-last
            # activation a backward program reads next); an input's new value comes as its value.
            written = {id(node) for _, node in mutated}
            # a mutated input's old data, which every call replaces, may be donated to the program
            donate = {id(start[j]): roots.index(node) for j, node in mutated} \
                if donation.enabled() else None
            graph = cut(roots, frozenset(k for k, node in enumerate(handler.roots)
                                         if id(node) not in written), donate=donate)
            executor.CACHE.remember(graph.spec)
            if warm_up:
                executor.executable_for(graph.spec, dynamic)  # warm-up compile: nothing runs
            untied = fed_starts.tie_starts(graph, sources)  # (while tracing with stand-ins)
            matcher = InputMatcher(graph, args, start, sources, mut_slots, handler.pinned)
            fed_starts.check_constant_starts(untied, matcher.plan)
            h = graph.spec.hash
            if debug_enabled():
                _print_debug(gm, name, graph)
        else:
            h, matcher, graph = None, None, None
    finally:
        dispatch.CPU_SCALAR_SOURCES, dispatch.TRACER = saved
        for j, a in enumerate(args):  # inputs a whole-tensor copy_ gave other device data: that
            if start[j] is not None:  # is no pending IR, but the program's to write
                root = buf.state_of(a).root
                if root.node is not start[j]:
                    root.write(start[j])
        dispatch.BUDGET.suspended -= 1
    loose = matcher.loose_args if matcher is not None else None
    return Extracted(h, matcher, handler, tuple(mut_slots), container, structure(args),
                     structure(args, loose) if loose else None,
                     graph.spec if graph is not None else None)


def _read_from_roots(args) -> None:
    """Make each view argument read its root's data with its chain of views in the trace. A View
    keeps the node it last read (per root value), and a read that ran it (`v.item()`, `print(v)`)
    made that node device data of its own (Node.become_data): traced so, the argument was a
    parameter no argument feeds, captured as a constant, and every later call computed with the
    value it had at extraction. Dropping the memo costs the next lazy read of the view one slice."""
    for a in args:
        if _is_lazy(a):
            st = buf.state_of(a)
            if type(st) is buf.View:
                st.forget_read()


def _print_debug(gm, name, graph):
    print(f"[lazyxla dynamo] {name}: FX graph\n{gm.code}")
    print(f"[lazyxla dynamo] {name}: {graph.spec.n_params} program inputs, "
          f"{len(graph.spec.outputs)} outputs, hash {graph.spec.hash}")
    print(f"[lazyxla dynamo] {name}: IR\n{graph.spec.text()}")


# Numbers (the `.item()` inputs as one, each int argument) tried one at a time, two traces each,
# where feeding them all makes no one program; with more, all are keyed.
_MOST_NUMBERS_TRIED = 6

# A graph that changes shape on every call (a generation loop's growing cache) would log a line
# per call: the first few are warnings, the rest debug messages (the report keeps every cause).
_RETRACES_LOGGED = 3
# Extracted programs a graph keeps per generation (lazyxla/generations.py), each a few KB: an int
# argument keyed by value (a length `x[:n]`, `x[n % 4]`) makes a new one for every value
_PROGRAMS_KEPT = 1024
# Why two traces with stand-ins are not one program fed: other stand-ins would not help
_DIFFERS = "the program depends on its numbers beyond its runtime scalars"


class Bridge:
    """The callable that replaces one FX graph: a map from the non-tensor-argument tuple to the
    extracted program, two generations deep (_PROGRAMS_KEPT). A miss re-extracts (one warm-up
    compile where the program is not cached) and logs why."""

    def __init__(self, gm, name="graph"):
        self.gm, self.name = gm, name
        self.programs = Generations(_PROGRAMS_KEPT)
        # programs traced at a call's numbers where they put a fed view outside the fed program's
        self.outside = Generations(_PROGRAMS_KEPT)
        self.last_key = None
        self.retraces = 0
        # Tensor inputs whose shapes are symbolic (dynamic=True): their shapes join the key, since
        # a partition of a dynamic graph may see a new length only through a tensor's shape.
        self.shape_positions = _symbolic_inputs(gm)
        # (a placeholder without metadata joins the key, but only a symbolic size makes the
        # programs shape variants from the first)
        self.dynamic = any(isinstance(v, torch.Tensor) and not all(type(d) is int for d in v.shape)
                           for v in _placeholder_values(gm))
        # Inputs the graph reads with .item() (floats Dynamo passes as 0-dim CPU tensors) and int
        # arguments: fed to the program on every call where that makes the same program
        # (input_items.py), else their values join the key, as a Python float argument's would.
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.item_positions = tuple(i for i, n in enumerate(placeholders)
                                    if any(is_input_item(u) for u in n.users))
        ints = _int_inputs(gm)
        self._use_feed(items.ItemFeed.of(gm, self.item_positions, ints) if (
            self.item_positions or ints) and envflags.flag("LAZYXLA_FEED_ITEM_INPUTS", True) else None)
        self.attrs = _attribute_tensors(gm)
        self.placed_outputs = fed_starts.placed_outputs(gm)  # (outputs an int argument places)
        # Set once an argument came as another view (or with other aliasing) than traced: from
        # then on the structure of the tensor arguments joins the key.
        self.by_structure = False
        # {argument: chain positions} of views whose starts programs feed (view_starts.py): the
        # structure in the key leaves those starts out
        self.loose_views = {}

    def _key(self, args, exact=False):
        if self.unkeyed:
            key = tuple([a for i, a in enumerate(args)
                         if i not in self.unkeyed and not isinstance(a, torch.Tensor)])
        else:
            key = _key(args)
        if self.shape_positions:
            key += tuple(tuple(getattr(args[i], "shape", ())) for i in self.shape_positions)
        if self.keyed_items:
            key += tuple(args[i].item() for i in self.keyed_items)
        if self.by_structure:
            key += (structure(args + self.attrs, None if exact else self.loose_views),)
        return key

    def _lookup(self, args):
        """(key, the program for these arguments or None): one that feeds the starts of the
        arguments' views (`loose_views`), else one traced at these starts."""
        key = self._key(args)
        entry = self.programs[key]
        if entry is None and self.loose_views:
            entry = self.programs[self._key(args, exact=True)]
        return key, entry

    def _store(self, args, entry):
        """Keep `entry` for these arguments. A program that feeds starts of views no program fed
        before replaces the programs kept so far (their keys hold the starts it feeds), and the
        key holds no structure until a call brings another (the matcher checks it): no per-call
        walk of the arguments for it. From then on the key's structure leaves those starts out."""
        loose = entry.matcher.loose_args if entry.matcher is not None else {}
        if any(not e <= self.loose_views.get(j, frozenset()) for j, e in loose.items()):
            merged = dict(self.loose_views)
            for j, e in loose.items():
                merged[j] = merged.get(j, frozenset()) | e
            self.loose_views, self.by_structure = merged, False
            self.programs.clear()
        self.programs.put(self._key(args, exact=loose != self.loose_views), entry)
        return entry

    def _structure_of(self, entry):
        """The structure `entry` is keyed by once the key holds one (as _store keys it)."""
        m = entry.matcher
        if entry.loose_structure is not None and m.loose_args == self.loose_views:
            return entry.loose_structure
        return entry.structure

    def _retrace(self, key, args, cause=None):
        """Extract a program for these arguments (`key`: theirs, for the log) and keep it."""
        if self.programs or self.programs.old:
            self._log_retrace(cause or _describe_change(self.last_key, key),
                              _INDEX_HINT if _ints_changed(self.last_key, key) else "")
        if self.items_fed:
            entry = self._extract_feeding(args)
            if entry is None:
                entry = self._feed_what_can_be_fed(args)
            if entry is not None:
                return self._store(args, entry)
        return self._store(args, extract(self.gm, args, self.name, self.attrs, dynamic=self.dynamic))

    def _log_retrace(self, cause, hint=""):
        metrics.counter_inc("DynamoRetrace")
        metrics.count_ever("DynamoRetrace")
        metrics.record_event("retrace", graph=self.name, cause=cause)
        self.retraces += 1
        if self.retraces <= _RETRACES_LOGGED:
            log.warning("lazyxla: re-extracting %s: %s", self.name, cause)
            if self.retraces == _RETRACES_LOGGED:
                log.warning("lazyxla: %s was re-extracted %d times; later re-extractions are "
                            "logged at DEBUG level and counted (DynamoRetrace); lazyxla.report() "
                            "lists the latest causes%s", self.name, _RETRACES_LOGGED, hint)
        else:
            log.debug("lazyxla: re-extracting %s: %s", self.name, cause)

    def _use_feed(self, feed):
        """Feed what `feed` feeds (None: nothing); the other `.item()` inputs and int arguments
        join the key by value."""
        self.feed = feed
        self.items_fed = feed is not None  # (feeding any number)
        self.unkeyed = feed.int_positions if feed else ()  # fed ints: not in the key
        self.keyed_items = tuple(i for i in self.item_positions
                                 if feed is None or i not in feed.item_positions)

    def _stop_feeding(self):
        """From now on the `.item()` inputs and int arguments are keyed by their values."""
        self._use_feed(None)
        self.programs.clear()
        self.outside.clear()

    def _feed_what_can_be_fed(self, args):
        """Where feeding every number makes no one program: the numbers that do, tried one at a
        time (the `.item()` inputs together), or None, everything keyed by value."""
        groups = ([("items", self.item_positions)] if self.item_positions else []) + \
            [("ints", (i,)) for i in sorted(self.feed.int_positions)]
        self._stop_feeding()
        if not 2 <= len(groups) <= _MOST_NUMBERS_TRIED:
            return None
        chosen, kept, entry = {"items": (), "ints": ()}, None, None
        for kind, positions in groups:
            trial = dict(chosen, **{kind: chosen[kind] + positions})
            feed = items.ItemFeed.of(self.gm, trial["items"], trial["ints"])
            if feed is None or feed.int_positions != frozenset(trial["ints"]):
                continue
            self._use_feed(feed)
            found = self._extract_feeding(args)
            if found is not None:
                chosen, kept, entry = trial, feed, found
        self._use_feed(kept)
        return entry

    def _extract_feeding(self, args):
        """The program with the fed numbers as runtime scalars, if a second trace with other
        stand-ins makes the same one, and where ints are fed, so does a trace at this call's own
        numbers (two stand-ins past a slice's end clamp alike); else None. Where the stand-ins
        fail and int arguments are fed (an index out of range, a slice's start clamped),
        stand-ins next to their values (fed_starts.py)."""
        sets = self.feed.stand_ins(args)
        if sets is None:
            return None
        values = self.feed.values_fn(*args)
        here = {k: values[k] for k in sets[0]}  # this call's numbers
        try:
            entry, cause = self._traced_alike(args, sets)
            if entry is not None and self.feed.args:  # (floats saturate nothing so)
                entry, cause = self._as_at(args, here, entry)
        except Exception as e:  # (a stand-in out of an op's range)
            entry, cause = None, e
        if entry is None and self.feed.args:  # (a slice's start clamped, an index out of range)
            entry, cause = self._feeding_near(args, values, here, sets, cause)
        if entry is None:
            log.debug("lazyxla: %s keys its number inputs by value: %s", self.name, cause)
        elif entry.hash is not None:
            executor.executable_for(executor.CACHE.spec(entry.hash), self.dynamic)  # (warm-up)
        return entry

    def _feeding_near(self, args, values, here, sets, cause):
        """(_traced_alike's program with stand-ins next to the int arguments' values, this call's
        numbers `here` making it too, None), or (None, why)."""
        tries = fed_starts.near_stand_ins(values, self.feed.args, sets)
        if not tries:
            return None, cause
        try:
            with items.traced_with(here):  # this call's numbers first: the cut's starts vary
                extract(self.feed.reading_gm, args, self.name, self.attrs, warm_up=False)
            for near in tries:
                try:
                    entry, cause = self._traced_alike(args, near)
                except Exception as e:  # out of range: the next pair
                    cause = e
                    continue
                if entry is not None:
                    return self._as_at(args, here, entry)
                if cause is _DIFFERS:
                    break  # (the next pair only where a stand-in met a number of the graph)
        except Exception as e:  # this call's values fail: keyed, so that the call raises
            cause = e
        return None, cause

    def _as_at(self, args, values, entry):
        """(entry, None) if a trace at `values` (this call's) makes entry's program with the same
        constants; else (None, why). The same structure is not enough: stand-ins that a slice
        clamps alike (x[k::2] of 2 rows at k = -2 and -3: start 0) leave its start a constant of
        the program, which this call's k (-1: start 1) would not read."""
        with items.traced_with(values):
            at = extract(self.feed.reading_gm, args, self.name, self.attrs, warm_up=False)
        if not items.same_constants(entry, at, self.feed.values_fn(*args)):
            return None, "the program at this call's numbers is another (" + _DIFFERS + ")"
        return entry, None

    def _traced_alike(self, args, sets):
        """(the program traced with each of the two `sets` of stand-ins, None) if both make the
        same one fed the same way; else (None, why). Raises what a trace raises."""
        traces, tracings = [], []
        for stand_ins in sets:
            with items.traced_with(stand_ins) as tracing:
                traces.append(extract(self.feed.reading_gm, args, self.name, self.attrs,
                                      warm_up=False))
            tracings.append(tracing)
            if tracing.ambiguous:
                return None, "two fed numbers could not be told apart"
        entry, check = traces
        if entry.hash != check.hash:
            return None, _DIFFERS
        if not items.same_program(entry, check) or not self.feed.agree(args, tracings) \
                or not fed_starts.checks_agree(tracings):
            return None, "a stand-in met a number of the graph's own"
        if not fed_starts.outputs_follow(self.placed_outputs, self.feed.int_positions,
                                         entry.outputs.recipe):
            return None, "an output that an int places would keep the stand-ins' view"
        entry.checks = tracings[0].checks
        return entry, None

    def _traced_at(self, call_args, fed, cause):
        """The program traced at this call's numbers, which place a fed view elsewhere than the
        fed program reads (fed_starts.OutsideTraced); kept by them, two generations deep."""
        key = (self._key(call_args), fed)
        entry = self.outside[key]
        if entry is None:
            self._log_retrace(f"a fed index places a view outside the traced one: {cause}")
            entry = extract(self.gm, call_args, self.name, self.attrs, dynamic=self.dynamic)
            self.outside.put(key, entry)
        return entry

    def __call__(self, *call_args, _retried=False):
        # One thread at a time: a call may re-trace, or change what is fed, under another's feet.
        with _runtime_lock:
            return self._call(call_args, _retried)

    def _call(self, call_args, _retried):
        key, entry = self._lookup(call_args)
        if entry is None:
            entry = self._retrace(key, call_args)
            key = self._key(call_args)  # (without the item values if they are fed from now on)
        self.last_key = key
        args = call_args + self.attrs if self.attrs else call_args
        fed = ()
        if self.items_fed:
            try:
                fed = self.feed.values(call_args)
            except items.NotFeedable as e:
                if _retried:
                    raise
                self._stop_feeding()
                log.warning("lazyxla: %s keys its number inputs by value from now on: %s",
                            self.name, e)
                return self._call(call_args, True)
            if entry.checks:
                try:
                    items.run_checks(entry.checks, fed)
                except fed_starts.OutsideTraced as e:
                    entry, fed = self._traced_at(call_args, fed, e), ()
        if entry.hash is None:  # nothing to compute: outputs are inputs, constants, numbers
            # (no matcher checks the arguments here: an output built from an input's buffer with
            # the chain traced needs the input to be still the view traced; views made on each
            # call from the arguments do not)
            now = structure(args) if entry.outputs.traced_views else entry.structure
            if now != entry.structure:
                return self._structure_changed(call_args, _retried, f"{entry.structure} -> {now}",
                                               entry)
            return _pack(entry, entry.outputs([], args, fed))
        exe = executor.CACHE.get(entry.hash) or executor.executable_by_hash(entry.hash, entry.spec)
        _counters["RunCachedGraph"] += 1
        try:
            feed, roots = entry.matcher(args, fed)
        except InputStructureChanged as e:
            return self._structure_changed(call_args, _retried, e, entry)
        if exe.donated:
            entry.matcher.guard_donated(roots, feed)
        try:
            results = executor.execute_arguments(exe, feed)
        except (TypeError, ValueError) as e:  # a tensor's shape/dtype differs from the trace's
            if _retried:
                raise
            self._retrace(key, call_args, cause=f"input shapes or dtypes changed under the same "
                                                f"non-tensor arguments {key}: {e}")
            return self._call(call_args, True)
        if entry.mutated:
            entry.matcher.write_back(args, roots, results)
        return _pack(entry, entry.outputs(results, args, fed, exe.out_perms))

    def _structure_changed(self, call_args, _retried, cause, failed):
        """A tensor argument is another view of its buffer, or aliases others differently, than
        the program `failed` was traced with: from now on the programs are keyed by that
        structure too."""
        if _retried:
            raise InputStructureChanged(str(cause))
        if not self.by_structure:  # key the programs traced so far by their structure too
            self.by_structure = True
            keyed = Generations(_PROGRAMS_KEPT)
            for k, x in self.programs.every_item():
                keyed.put(k + (self._structure_of(x),), x)
            self.programs = keyed
        key, entry = self._lookup(call_args)
        if entry is None or entry is failed:  # (a key that leaves a start out finds one traced at it)
            self._retrace(key, call_args, cause=f"tensor argument structure changed: {cause}")
        return self._call(call_args, True)


def _pack(entry, outs):
    c = entry.container
    return outs[0] if c is None else (outs if c is list else c(outs))


_INDEX_HINT = (". An int argument that changes is keyed by its value where it sets a shape, a "
               "length or a dim (x[:n], x.view(n, -1)) or goes through other arithmetic than "
               "+ - * / (x[n % 4]): each value is a program of its own. Starts and indexes of "
               "views (x[i], x[i:i + 4], cache[i] = v, returned or saved for the backward too) "
               "and numbers the tensor ops take are fed on every call, and so is an index passed "
               "as a 1-element int64 tensor on the device (x.index_select(0, idx))")


def _ints_changed(old, new) -> bool:
    """Whether an int argument differs between the two keys."""
    return old is not None and len(old) == len(new) and any(
        type(a) is int and type(b) is int and a != b for a, b in zip(old, new))


def _describe_change(old, new) -> str:
    if old is None:
        return f"new non-tensor arguments {new}"
    if len(old) != len(new):
        return f"number of non-tensor arguments changed {len(old)} -> {len(new)}"
    diffs = [f"arg {i}: {a!r} -> {b!r}" for i, (a, b) in enumerate(zip(old, new)) if a != b]
    return "non-tensor arguments (and symbolic input shapes) changed: " + (", ".join(diffs) if diffs else f"{new} (seen before)")

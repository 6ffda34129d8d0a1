"""Execution: cut pending IR into a graph, find or compile its executable, run it.

Buffer-level functions serve the device layer; the tensor-level functions at the bottom are the
public runtime API the dynamo bridge is built on (graph_hash, warm_up_cache, graph_inputs,
run_cached_graph, clear_pending_ir, needs_materialization).
"""
from __future__ import annotations

import collections
import contextlib
import logging
import operator
import time
import weakref

import numpy as np
import torch

from lazyxla import host_malloc, metrics
from lazyxla.ir import buffer as buf
from lazyxla.ir.graph import Graph, cut
from lazyxla.ir.node import DATA, SCALAR, data_node, physical_shape
from lazyxla.jaxenv import (check_not_forked, clear_scalar_cache, np_dtype, put_array, relayout,
                            wait_ready, x64)
from lazyxla.lowering import registry
from .cache import CompilationCache
from . import donation, tiering
from .compiler import compile_spec

log = logging.getLogger("lazyxla")
_now = time.perf_counter_ns
_weakref = weakref.ref

CACHE = CompilationCache()
# Weak references to the outputs of dispatched executions, for wait(). Weak: holding the arrays
# kept up to 64 steps of parameters and optimizer state alive in a loop that never waits.
_inflight: list = []
_INFLIGHT_PRUNE = 4096
_compile_listeners: list = []  # called with (spec, seconds) after every XLA compile


def set_cache_capacity(n: int) -> None:
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"lazyxla.set_cache_capacity: expected an int, got {type(n).__name__}")
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"lazyxla.set_cache_capacity: the cache must hold at least one "
                         f"executable, got {n}")
    CACHE.capacity = n
    while len(CACHE.executables) > n:
        CACHE.evict_oldest()


def executable_for(spec, shape_variant: bool = False):
    """The executable of `spec`, compiling on a miss (counters CachedCompile / UncachedCompile).
    `shape_variant`: the caller knows the program's shapes vary (a graph with symbolic shapes), so
    it is compiled quick even if it is the first of its op structure (runtime/tiering.py)."""
    exe = CACHE.get(spec.hash)
    if exe is not None:
        metrics.counter_inc("CachedCompile")
        return exe
    metrics.counter_inc("UncachedCompile")
    metrics.count_ever("UncachedCompile")
    t0 = time.perf_counter()
    quick = tiering.compile_quick(spec, shape_variant)
    if quick:
        metrics.counter_inc("QuickCompile")
    exe = compile_spec(spec, quick)
    seconds = time.perf_counter() - t0
    metrics.record_event("compile", hash=spec.hash, ops=spec.n_ops, inputs=spec.n_params,
                         outputs=len(spec.outputs), ms=round(seconds * 1e3, 2), quick=quick,
                         offsets=len(spec.offset_ops))
    for fn in _compile_listeners:
        fn(spec, seconds)
    CACHE.put(spec.hash, exe, spec)
    return exe


def executable_by_hash(h: str, spec=None):
    """The executable of graph `h`, compiled again from its saved graph (or `spec`, the caller's
    own copy of it) if the cache evicted it, or compiled first if it never was (graph_hash's)."""
    exe = CACHE.get(h)
    if exe is not None:
        return exe
    spec = CACHE.spec(h) or spec
    if spec is None:
        raise KeyError(f"lazyxla: no compiled graph with hash {h}")
    if CACHE.was_evicted(h):
        metrics.counter_inc("RecompileAfterEviction")
        log.info("lazyxla: graph %s was evicted from the compilation cache; recompiling", h)
    return executable_for(spec)


def param_value(node):
    """What the executable is fed for a leaf: the device array, or the runtime scalar's value
    (the Program's feed makes it a 0-dim array)."""
    return node.data


def execute(program, inputs):
    """Run a Program on its parameter values (in graph order); returns its outputs, dispatched
    asynchronously."""
    feed = program.feed
    return execute_arguments(program, inputs if feed is None else feed(inputs))


def execute_arguments(program, arguments):
    """As execute(), given the executable's own arguments (one per parameter, a runtime scalar as
    a 0-dim array: compiler.scalar_layout), which a caller may keep prepared."""
    check_not_forked()
    if program.upgrade is not None:
        program.upgrade.on_run(program)
    t0 = _now()
    with x64(True):
        outs = program.compiled(*arguments)
    if program.checks:
        outs, flags = outs[:-1], outs[-1]
        if program.strict:
            _raise_out_of_range(program.checks, flags)
        else:
            _unreported.append((program.checks, flags))
            if len(_unreported) > _INFLIGHT_PRUNE:  # a loop that never reads: keep flagged ones
                _prune(_unreported, lambda e: not e[1].is_ready() or np.asarray(e[1]).any())
    metrics.metric_add("ExecuteTime", _now() - t0)
    _inflight.extend([_weakref(a) for a in outs])
    if len(_inflight) > _INFLIGHT_PRUNE:
        # (an array a later program took as donated is deleted: nothing to wait for)
        _prune(_inflight, lambda r: (a := r()) is not None and not a.is_deleted() and not a.is_ready())
    return outs


def _prune(entries: list, keep) -> None:
    """Keep the entries `keep` accepts, leaving any another thread appends meanwhile: one slice
    assignment, atomic under the GIL, replaces the prefix that was looked at."""
    n = len(entries)
    entries[:n] = [e for e in entries[:n] if keep(e)]


def _raise_out_of_range(checks, flags) -> None:
    """Strict checks: waits for the program (a host read of its flags) and raises like eager."""
    _raise_flagged([c for c, f in zip(checks, np.asarray(flags)) if f],
                   "lazyxla index checks: the program ran; no result of it was kept")


def _raise_flagged(bad, how) -> None:
    """Eager's error for the first kind of check flagged in `bad` ((op name, kind), in order)."""
    if not bad:
        return
    kind = bad[0][1]
    names = ", ".join(dict.fromkeys(n for n, k in bad if k == kind))
    error, message, counter = registry.CHECK_ERRORS[kind]
    metrics.counter_inc(counter)
    raise error(f"{message.format(ops=names)} ({how})")


# (checks, flags) of programs run with deferred checks, not yet reported
_unreported: list = []


def report_index_errors(block: bool = False) -> None:
    """Deferred checks: raise eager's error (for each kind, the exception eager raises:
    lowering/registry.py's CHECK_ERRORS) if a program run since the last report read an index
    out of range, divided an integer by zero or computed with a value eager rejects. Reads and
    syncs look at the programs that have finished; wait() waits for all."""
    if not _unreported:
        return
    bad, pending, n = [], [], len(_unreported)
    for checks, flags in _unreported[:n]:
        if not block and not flags.is_ready():
            pending.append((checks, flags))
            continue
        bad.extend(c for c, f in zip(checks, np.asarray(flags)) if f)
    _unreported[:n] = pending
    _raise_flagged(bad, "reported by lazyxla after the program ran: its out-of-range reads were "
                        "clamped, its out-of-range writes dropped, its integer divisions by zero "
                        "gave -1 (remainders: the dividend), the values eager rejects (a "
                        "probability of 1.5) were used as they were, and its results were kept; "
                        "lazyxla.set_index_checks('strict') raises at the call instead")


def reset_programs() -> None:
    """Drop every compiled executable (their graphs stay: each recompiles on next use), so that a
    changed compile option (index checks) takes effect for every program."""
    CACHE.clear()
    _CONSTANTS.clear()


def _roots(buffers):
    roots, seen = [], set()
    for b in buffers:
        n = b.node
        if n.op is not DATA and n.op is not SCALAR and id(n) not in seen:
            seen.add(id(n))
            roots.append(n)
    return roots


def sync_buffers(buffers) -> None:
    """Execute the pending computations of `buffers` (one program) and make the results their
    device data. Computed nodes become data, so other pending graphs that share them reuse them.
    A partial sync (a read) also keeps what the rest of the recording needs of its program: the
    other pending buffers it computes, and the nodes it computes that pending work outside it
    reads. A loop that reads a value every step and never syncs (a generation loop: its KV cache
    written in place, its position counters chained step after step) then runs one step's
    program each time, instead of one that grows with every step and recomputes them all."""
    with buf.RUNTIME_LOCK:
        _sync_buffers(buffers)


def _sync_buffers(buffers) -> None:
    # Donation (runtime/donation.py) only where nothing stays pending: an op of the program that
    # reads a donated input could still be read by pending work left out of a partial sync.
    every_pending = len(buffers) >= len(buf.PENDING)
    buffers = [b for b in buffers if b.node.op is not DATA]
    for b in buffers:
        if b.node.op is SCALAR:  # a buffer filled from a runtime scalar: nothing to compile
            b.write(_scalar_to_data(b.node))
    roots = _roots(buffers)
    if not roots:
        return
    if len(roots) == 1 and not roots[0].inputs and len(buffers) >= len(buf.PENDING):
        outs = _factory_results(roots[0])
    else:
        # the buffers' old data, which this sync replaces, may be donated to the program
        donate, holders = donation.sync_candidates(buffers, roots) \
            if every_pending and donation.in_syncs() else (None, None)
        graph = cut(roots, split=True, donate=donate)
        if len(buffers) < len(buf.PENDING):
            kept, computed = _needed_later(graph, roots, buffers)
            buffers += computed
            if kept:
                roots = roots + kept
                graph = cut(roots, split=True, donate=donate)
        if graph.stages is not None:  # its shape-varying part apart (ir/stages.py)
            metrics.counter_inc("StagedSync")
            for results in graph.stages:
                for node, arr in zip(results, _results(cut(results))):
                    node.become_data(arr)
            roots, outs = (), ()
        else:
            outs = _results(graph, holders)
    for node, arr in zip(roots, outs):
        node.become_data(arr)
    for b in buffers:
        node = b.node
        if node.op is DATA:
            b.committed = node
            buf.PENDING.discard(b)
            if b.node is not node:  # another thread wrote it meanwhile: that value is pending
                buf.PENDING.add(b)


def _results(graph, holders=None):
    """The outputs of a graph's program, run on its parameters' current values. holders: for a
    program with donated parameters, how many synced buffers hold each (donation.guard_sync)."""
    spec = graph.spec
    if spec.n_params == 0:  # no inputs, no RNG seed: a constant
        return _constant_results(spec)
    values = [param_value(p) for p in graph.params]
    program = executable_for(spec)
    if program.donated:
        donation.guard_sync(spec, graph.params, values, holders or {})
    return execute(program, values)


# How far below each pending buffer _needed_later looks, and how many nodes in all (per op of the
# program read): a read must not cost more than its program, whatever else is pending (a running
# sum never read, chained over thousands of steps, was walked whole at every read).
_WALK_DEPTH = 16
_WALK_PER_OP, _WALK_MIN = 4, 1024


def _needed_later(graph, roots, buffers):
    """(nodes `graph` computes, besides its roots, that other live pending buffers are or read;
    the buffers among those whose value it computes). Most recently written buffers first."""
    computes, taken = graph.computes, {id(r) for r in roots}
    kept, seen, computed = [], set(), []
    syncing = {id(b) for b in buffers}
    budget = _WALK_PER_OP * graph.spec.n_ops + _WALK_MIN
    for b in reversed(list(buf.PENDING)):
        if budget <= 0:
            break
        if id(b) in syncing:
            continue
        if computes(b.node):
            computed.append(b)
        stack = [(b.node, 0)]
        while stack and budget > 0:
            n, depth = stack.pop()
            budget -= 1
            if id(n) in seen:
                continue
            seen.add(id(n))
            if computes(n):
                if id(n) not in taken and n.shape is not None:  # (not a multi-output op's tuple)
                    taken.add(id(n))
                    kept.append(n)
            elif depth < _WALK_DEPTH and n.op is not DATA and n.op is not SCALAR:
                stack.extend([(i, depth + 1) for i in n.inputs])
    return kept, computed


# graph hash -> the outputs of a program with no parameters. Its result never changes and JAX
# arrays are immutable (lazyxla never donates), so later syncs of it share the arrays.
_CONSTANTS: collections.OrderedDict = collections.OrderedDict()
_CONSTANT_MAX_BYTES = 1 << 20  # per program; larger constants are recomputed each time
_CONSTANT_MAX_ENTRIES = 256


def _constant_results(spec):
    outs = _CONSTANTS.get(spec.hash)
    if outs is not None:
        _CONSTANTS.move_to_end(spec.hash)
        metrics.counter_inc("ConstantReuse")
        return outs
    outs = _host_fills(spec) or execute(executable_for(spec), [])
    if sum(a.nbytes for a in outs) <= _CONSTANT_MAX_BYTES:
        _CONSTANTS[spec.hash] = outs
        if len(_CONSTANTS) > _CONSTANT_MAX_ENTRIES:
            _CONSTANTS.popitem(last=False)
    return outs


def release_cached_arrays() -> None:
    """Drop the device arrays kept for reuse (constant programs' results, runtime scalars), then
    return the free host memory malloc keeps to the OS (host_malloc): torch.accelerator's
    empty_cache."""
    _CONSTANTS.clear()
    clear_scalar_cache()
    host_malloc.release()


def _host_fills(spec):
    """The outputs of a program of fills alone (an optimizer's zeros_like state, made on its first
    step), made on the host and transferred: no XLA compile. None for any other program.
    Outputs of one shape, dtype and fill share one array (arrays are immutable; an AdamW's two
    moments of a weight are alike), and zeros come from np.zeros, whose pages the OS maps on first
    touch, which the transfer (aliasing an aligned host array) does not do: GPT training's 165 MB
    of first-step state took 0.5 s to write and copy."""
    entries = spec.entries
    if not all(e[0].fill is not None for e in entries):  # (no parameters: entries are all ops)
        return None
    made: dict = {}
    outs = []
    for j in spec.outputs:
        _, _, _, shape, dtype = entries[j]
        key = (shape, dtype, entries[j][0].fill)
        a = made.get(key)
        if a is None:
            fill, dt = key[2], np_dtype(dtype)
            a = made[key] = put_array(np.zeros(shape, dt) if fill == 0 else np.full(shape, fill, dt))
        outs.append(a)
    return outs


def _factory_results(node):
    """The value of a pending op with no inputs (a random op has its seed as one), read alone:
    the grad seed ones_like(loss) that every backward of a compiled graph is fed. A constant,
    looked up by the op itself without cutting a graph."""
    key = (node.op, node.key if node.key is not None else repr(node.attrs), node.shape, node.dtype)
    try:
        outs = _CONSTANTS.get(key)
    except TypeError:  # an unhashable attribute: the graph's hash keys it
        return _constant_results(cut([node]).spec)
    if outs is not None:
        _CONSTANTS.move_to_end(key)
        metrics.counter_inc("ConstantReuse")
        return outs
    spec = cut([node]).spec
    outs = _constant_results(spec)
    if spec.hash in _CONSTANTS:  # small enough to keep
        _CONSTANTS[key] = outs
        if len(_CONSTANTS) > _CONSTANT_MAX_ENTRIES:
            _CONSTANTS.popitem(last=False)
    return outs


def _scalar_to_data(node):
    return data_node(put_array(np.array(node.data, dtype=np_dtype(node.dtype))), node.dtype)


_sync_listeners: list = []  # called after every full sync (the device resets its op budget)


def sync_all() -> None:
    metrics.counter_inc("MarkStep")
    for fn in _sync_listeners:
        fn()
    sync_isolating(list(buf.PENDING))


def sync_isolating(buffers) -> None:
    """sync_buffers, except that a failing computation loses no other result: every other buffer
    is committed, then the error is raised (see _sync_isolating). sync() and reads use this."""
    with buf.RUNTIME_LOCK:
        try:
            sync_buffers(buffers)
        except Exception:
            errors: list = []
            _sync_isolating(buffers, errors)
            if errors:
                raise errors[0]


def _sync_isolating(buffers, errors) -> None:
    """A program failed to build or run. So that one failing computation loses no other result
    (and fails no later sync), sync halves of the buffers until each failing buffer is alone: the
    rest become data. A failing buffer that held data before (a parameter updated in place) goes
    back to it, dropping its writes since then, as eager keeps a tensor whose in-place op raised;
    a new one leaves the pending set, and reading it raises its error again. A few extra
    compiles, on the error path only."""
    try:
        sync_buffers(buffers)
    except Exception as e:
        if len(buffers) == 1:
            b = buffers[0]
            if b.committed is not None:
                b.node = b.committed
            buf.PENDING.discard(b)
            metrics.counter_inc("FailedSyncBuffer")
            errors.append(e)
            return
        half = len(buffers) // 2
        _sync_isolating(buffers[:half], errors)
        _sync_isolating(buffers[half:], errors)


def wait() -> None:
    """Block until every dispatched execution whose outputs are still referenced has finished."""
    check_not_forked()
    n = len(_inflight)
    refs = _inflight[:n]
    del _inflight[:n]
    wait_ready([a for r in refs if (a := r()) is not None and not a.is_deleted()])
    report_index_errors(block=True)


# ---------------------------------------------------------------- public runtime API (tensors)

def _lazy_tensors(tensors, api: str) -> list:
    """The tensors a public call names: one lazyxla tensor or a sequence of them (a CPU tensor,
    or a tensor where a list was meant, would otherwise fail deep inside or be iterated)."""
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    try:
        tensors = list(tensors)
    except TypeError:
        raise TypeError(f"lazyxla.{api}: expected a lazyxla tensor or a list of them, got "
                        f"{type(tensors).__name__}") from None
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor) or not buf.has_state(t):
            what = f"a tensor on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise TypeError(f"lazyxla.{api}: item {i} is {what}, not a lazyxla tensor")
    return tensors


def needs_materialization(tensors) -> list[bool]:
    """For each tensor: does it carry a pending recording (rather than device data)?"""
    return [buf.state_of(t).root.node.op is not DATA
            for t in _lazy_tensors(tensors, "needs_materialization")]


def cut_tensors(tensors, api: str = "cut_tensors") -> Graph | None:
    """The graph computing `tensors` (their pending roots); None when nothing is pending."""
    roots = _roots([buf.state_of(t).root for t in _lazy_tensors(tensors, api)])
    if not roots:
        return None
    with buf.RUNTIME_LOCK:
        return cut(roots)


def graph_hash(tensors) -> str | None:
    g = cut_tensors(tensors, "graph_hash")
    if g is None:
        return None
    CACHE.remember(g.spec)
    return g.spec.hash


def warm_up_cache(tensors):
    """Compile the graph of `tensors` into the cache without executing it. Returns the Graph."""
    g = cut_tensors(tensors, "warm_up_cache")
    if g is not None:
        executable_for(g.spec)
    return g


def graph_inputs(tensors) -> list:
    """The program parameters of the graph of `tensors`, in order: device arrays for device data
    (as the program takes them: a channels-last activation that a compiled program handed on
    transposed stays so), Python/numpy values for runtime scalars."""
    g = cut_tensors(tensors, "graph_inputs")
    return [] if g is None else [p.data for p in g.params]


def run_cached_graph(h: str, inputs) -> list:
    """Execute the cached program `h` on `inputs` (in graph_inputs order: device arrays or
    whole lazyxla tensors for its arrays, numbers for its runtime scalars); returns new lazyxla
    tensors. An evicted program is recompiled from its spec."""
    metrics.counter_inc("RunCachedGraph")
    exe = executable_by_hash(h)
    spec = CACHE.spec(h)
    inputs = list(inputs)
    if spec is not None:
        inputs = _checked_inputs(spec, inputs, h)
    outs = execute(exe, inputs)
    return [buf.wrap_node(data_node(a, _torch_dtype(a))) for a in outs]


def _checked_inputs(spec, inputs, h) -> list:
    """`inputs` as the program's parameters, or a clear error for a wrong count, shape or dtype."""
    where = f"lazyxla.run_cached_graph: graph {h}"
    if len(inputs) != spec.n_params:
        raise ValueError(f"{where} takes {spec.n_params} inputs (in graph_inputs order), got "
                         f"{len(inputs)}")
    out, perms = [], spec.param_perms
    for i, v in enumerate(inputs):
        _, shape, dtype = spec.entries[i]
        perm = perms.get(i)
        if perm is not None:  # (graph_inputs gives it as the program takes it)
            shape = physical_shape(shape, perm)
        if i in spec.scalar_params:
            if not _scalar_of(v, dtype):  # (2.5 for an int was truncated, '7' parsed as 7)
                raise TypeError(f"{where}: input {i} is a runtime scalar ({dtype}), got "
                                f"{type(v).__name__} {v!r}"[:300])
        else:
            if isinstance(v, torch.Tensor):
                v = _whole_tensor_data(v, f"{where}: input {i}", perm)
            got = (tuple(getattr(v, "shape", ())), getattr(v, "dtype", type(v)))
            if got[0] != tuple(shape) or np.dtype(got[1]) != np_dtype(dtype):
                raise ValueError(f"{where}: input {i} must have shape {tuple(shape)} and dtype "
                                 f"{dtype}, got shape {got[0]} and dtype {got[1]}")
        out.append(v)
    return out


def _scalar_of(v, dtype) -> bool:
    """Whether Python or numpy number `v` is a value of a runtime scalar of `dtype`, as its kind
    (an int for an int64, not 2.5; no bool for a number) and range."""
    if isinstance(v, (bool, np.bool_)):
        return dtype == torch.bool
    if dtype.is_complex:
        return isinstance(v, (int, float, complex, np.number))
    if dtype.is_floating_point:
        return isinstance(v, (int, float, np.integer, np.floating))
    if dtype == torch.bool or not isinstance(v, (int, np.integer)):
        return False
    info = torch.iinfo(dtype)
    return info.min <= int(v) <= info.max


def _whole_tensor_data(t, where, perm=None):
    st = buf.storage_state(t.untyped_storage(), None)
    if st is None or type(st) is not buf.Buffer or t.is_conj() or t.is_neg():
        raise TypeError(f"{where}: pass a device array from graph_inputs or a lazyxla tensor that "
                        f"is not a view (got {'a view' if st is not None else f'a tensor on {t.device}'})")
    if st.node.op is not DATA:
        sync_isolating([st])
    return relayout(st.node.data, st.node.perm, perm)


def _torch_dtype(a):
    from lazyxla.jaxenv import torch_dtype
    return torch_dtype(a.dtype)


def clear_pending_ir() -> None:
    """Drop the pending recording of every live tensor: each buffer reverts to the device data it
    last held (so inputs that a trace mutated are restored)."""
    with buf.RUNTIME_LOCK:
        revert(list(buf.PENDING))


@contextlib.contextmanager
def undone_recording():
    """For a trace whose recording is dropped: holds the runtime (other threads' syncs and reads
    wait; their recording goes on), syncs what is pending, keeps this thread's recording apart,
    and at the end drops it: each buffer the trace wrote goes back to its device data."""
    with buf.RUNTIME_LOCK:
        sync_all()
        saved = buf.PENDING.begin_trace()
        try:
            yield
        finally:
            revert(buf.PENDING.end_trace(saved))


def revert(buffers) -> None:
    """Drop the pending values of `buffers`: each goes back to its last device data."""
    for b in buffers:
        if b.node.op is not DATA and b.committed is not None:
            b.node = b.committed
        buf.PENDING.discard(b)

"""Quick first compiles for shape variants on XLA's CPU backend, upgraded when they are reused.

A program whose op graph was compiled before at other shapes (a new sequence length under
torch.compile(dynamic=True), a KV cache that grows in lazy mode, an epoch's smaller last batch)
is compiled first with LLVM at -O0 and XLA's classic element emitters: 0.10-0.36x the compile
time, for programs that run 1.0-3.6x as long (benchmarks/opt_level.py on the suite's programs).
Most new lengths run once or a few times, so this is the cheaper program. A variant that runs
UPGRADE_START times is lowered again and compiled optimized, as every other program is, in a
background thread; from its UPGRADE_AT-th run on, the optimized program runs, that run waiting
for its compile if it has not finished. Which runs are quick depends on run counts, never on
timing, so a script computes the same numbers every time it runs (quick and optimized programs
may differ in the last bits of a float). The first graph of each op structure is compiled
optimized, unless it comes from a graph with symbolic shapes (torch.compile(dynamic=True)): a
loop of fixed shapes never runs a quick program.
LAZYXLA_QUICK_COMPILE=0 turns this off.
"""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time

import jax

from lazyxla import metrics
from lazyxla.envflags import flag
from lazyxla.jaxenv import x64

log = logging.getLogger("lazyxla")

# LLVM -O0, XLA's classic element emitters, and the program's kernels as one LLVM module: XLA
# splits it to compile the parts on several threads, which on one or two cores cost a quick
# compile 1.35-2x the time (and the split programs ran up to 1.13x as long)
QUICK_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False,
                 "xla_cpu_parallel_codegen_split_count": 1}
UPGRADE_START = 8  # the run that starts the optimized compile (in the background)
UPGRADE_AT = 16  # the first run of the optimized program
_FAMILIES_MAX = 4096

# op structure (shapes and integer attributes left out) -> the hash of the first program with it
_families: collections.OrderedDict = collections.OrderedDict()
_families_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def enabled() -> bool:
    return jax.default_backend() == "cpu" and flag("LAZYXLA_QUICK_COMPILE", True)


def compile_quick(spec, shape_variant: bool = False) -> bool:
    """Registers `spec`'s program; True when it is a shape variant of one compiled before (the
    same ops reading the same operands, parameters of the same dtypes, other shapes or sizes), or
    when the caller says it is one (`shape_variant`: a graph traced with symbolic shapes)."""
    if not enabled():
        return False
    key = hash(_structure(spec))  # (a collision would cost a program speed, never a value)
    with _families_lock:
        first = _families.setdefault(key, spec.hash)
        _families.move_to_end(key)
        if len(_families) > _FAMILIES_MAX:
            _families.popitem(last=False)
    return shape_variant or first != spec.hash


def _structure(spec):
    """What a program's shape variants share: its wiring, ops, dtypes and non-integer attributes."""
    params = tuple(e[2] for e in spec.entries[:spec.n_params])
    ops = tuple((e[0].name, e[1], _shapeless(e[2]), _dtypes(e)) for e in spec.entries[spec.n_params:])
    return params, ops, tuple(spec.outputs), frozenset(spec.scalar_params), frozenset(spec.rng_params)


def _shapeless(attrs):
    """An op's attributes with every integer left out (sizes, but dims too: a program that sums
    another dim counts as a variant, which costs it only its first UPGRADE_AT - 1 runs' speed)."""
    t = type(attrs)
    if t is int:
        return None
    if t is tuple or t is list:
        return tuple(_shapeless(a) for a in attrs)
    try:
        hash(attrs)
    except TypeError:
        return repr(t)
    return attrs


def _dtypes(entry):
    shape, dtype = entry[3], entry[4]  # (several outputs: dtype holds each one's spec, or None)
    return tuple(None if sd is None else sd[1] for sd in dtype) if shape is None else dtype


class Upgrade:
    """A quick program's way to its optimized compile: counts its runs (on_run, called before
    each), lowers the program again at run UPGRADE_START (here: lowerings trace in Python) and
    compiles it in the background, and swaps the optimized executable in at run UPGRADE_AT.
    `lower()` gives the program's jax Lowered form."""
    __slots__ = ("lower", "options", "what", "runs", "lowered", "future", "lock")

    def __init__(self, lower, options: dict, what: str):
        self.lower, self.options, self.what = lower, options, what
        self.runs, self.lowered, self.future, self.lock = 0, None, None, threading.Lock()

    def on_run(self, program) -> None:
        with self.lock:
            if program.upgrade is not self:  # another thread swapped it in meanwhile
                return
            self.runs += 1
            if self.runs == UPGRADE_START:
                try:
                    with x64(True):
                        self.lowered = self.lower()
                except Exception as e:
                    self._failed(program, e)
                    return
                self.future = _submit(self._compile)
            if self.runs >= UPGRADE_AT:
                compiled = self._result(program)
                if compiled is not None:
                    program.compiled = compiled
                program.upgrade = None
                self.lowered = self.future = None

    def _compile(self):
        t0 = time.perf_counter()
        with metrics.timed("UpgradeCompileTime"), x64(True):
            compiled = self.lowered.compile(compiler_options=self.options)
        metrics.counter_inc("UpgradeCompile")
        metrics.record_event("upgrade", graph=self.what, ms=round((time.perf_counter() - t0) * 1e3, 2))
        return compiled

    def _result(self, program):
        """The optimized executable (compiled here if its turn in the background has not come),
        or None if its compile failed."""
        t0 = time.perf_counter_ns()
        try:
            if self.future is None or self.future.cancel():
                return self._compile()
            return self.future.result()
        except Exception as e:  # (XLA out of memory, a thread pool shut down at exit)
            self._failed(program, e)
            return None
        finally:
            metrics.metric_add("UpgradeWaitTime", time.perf_counter_ns() - t0)

    def _failed(self, program, e) -> None:
        """Logged; the quick program stays."""
        log.warning("lazyxla: the optimized compile of graph %s failed (%s: %s); its quick "
                    "program stays", self.what, type(e).__name__, e)
        program.upgrade = None
        self.lowered = self.future = None


def _submit(fn):
    """Runs fn in the upgrade thread (one: compiles queue behind each other). At interpreter exit
    the compile in flight finishes and queued ones are dropped (concurrent.futures' own exit)."""
    global _pool
    with _families_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lazyxla-upgrade")
    try:
        return _pool.submit(fn)
    except RuntimeError:  # the interpreter is exiting: the run that needs it compiles in place
        return None


def forget() -> None:
    """Forget the op structures seen (for tests)."""
    with _families_lock:
        _families.clear()

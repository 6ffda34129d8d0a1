"""Counters and timed metrics, with torch_xla's names and semantics so users' habits carry over.

Counters are integers (`counter_value` is None when absent or zero); metrics are timings or sizes
recorded as samples. Nothing resets them implicitly: only the clear_* functions do.
"""
from __future__ import annotations

import collections
import contextlib
import time

_MAX_SAMPLES = 1024

_counters: collections.Counter = collections.Counter()
_metrics: dict[str, list] = {}  # name -> [count, total, deque of samples]
_fallback_sites: dict[str, collections.Counter] = {}  # op name -> Counter of source lines


def counter_inc(name: str, n: int = 1) -> None:
    _counters[name] += n


# Counts no clear resets: assert_no_recompile compares them across a block that may clear the
# counters (the difference of UncachedCompile came out negative, or 0 over a real compile)
_ever: collections.Counter = collections.Counter()


def count_ever(name: str, n: int = 1) -> None:
    _ever[name] += n


def ever(name: str) -> int:
    return _ever[name]


def counter_value(name: str):
    v = _counters.get(name, 0)
    return v if v else None


def counter_names() -> list[str]:
    return sorted(k for k, v in _counters.items() if v)


def metric_add(name: str, value: float) -> None:
    m = _metrics.get(name)
    if m is None:
        m = _metrics[name] = [0, 0.0, collections.deque(maxlen=_MAX_SAMPLES)]
    m[0] += 1
    m[1] += value
    m[2].append(value)


@contextlib.contextmanager
def timed(name: str):
    """Record the wall time of the block (nanoseconds, as torch_xla does) under metric `name`."""
    t0 = time.perf_counter_ns()
    try:
        yield
    finally:
        metric_add(name, time.perf_counter_ns() - t0)


def metric_data(name: str):
    """(count, total, samples) or None."""
    m = _metrics.get(name)
    if m is None or m[0] == 0:
        return None
    return m[0], m[1], list(m[2])


def metric_count(name: str) -> int:
    """How many samples a metric has taken (0 if none)."""
    m = _metrics.get(name)
    return m[0] if m is not None else 0


def metric_names() -> list[str]:
    return sorted(k for k, v in _metrics.items() if v[0])


def record_fallback(op_name: str, site: str | None) -> None:
    counter_inc(f"aten::{op_name}")
    _fallback_sites.setdefault(op_name, collections.Counter())[site or "<unknown>"] += 1


def executed_fallback_ops() -> list[str]:
    """Names of aten ops that ran through the CPU fallback since the counters were last cleared."""
    return sorted(k[len("aten::"):] for k, v in _counters.items() if v and k.startswith("aten::"))


def fallback_sites() -> dict[str, dict[str, int]]:
    return {op: dict(c) for op, c in _fallback_sites.items() if c}


def snapshot() -> dict:
    """A copy of all counters (used by the dynamo bridge to save and restore around trial runs)."""
    return {"counters": dict(_counters), "sites": {k: collections.Counter(v) for k, v in _fallback_sites.items()}}


def restore(snap: dict) -> None:
    """The counters as `snap` holds them, but for those of the compilation cache: a program
    compiled meanwhile stays compiled and cached (as its compile event and CompileTime say)."""
    lasting = {k: _counters[k] for k in LASTING if k in _counters}
    _counters.clear()
    _counters.update(snap["counters"])
    for k, v in lasting.items():  # (Counter.update would add)
        _counters[k] = v
    _fallback_sites.clear()
    _fallback_sites.update(snap["sites"])


# Counters of what outlives a trial run (the bridge's): compiles and the compilation cache's state.
LASTING = frozenset({"UncachedCompile", "QuickCompile", "UpgradeCompile", "RecompileAfterEviction",
                     "CompilationCacheEviction", "MapLimitEviction", "PersistentCacheHit",
                     "PersistentCacheMiss", "PersistentCacheCorrupt"})


_events: collections.deque = collections.deque(maxlen=4096)


def record_event(kind: str, **info) -> None:
    """A notable event for the run report: 'compile' (hash, ops, ms), 'retrace' (cause), ..."""
    _events.append(dict(kind=kind, time=time.time(), **info))


def events(kind: str | None = None) -> list[dict]:
    return [e for e in _events if kind is None or e["kind"] == kind]


def clear_counters() -> None:
    _counters.clear()
    _fallback_sites.clear()
    _events.clear()


def clear_metrics() -> None:
    _metrics.clear()


def clear_all() -> None:
    clear_counters()
    clear_metrics()


def _fmt_ns(ns: float) -> str:
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3f}{unit}"
    return f"{ns:.0f}ns"


def report() -> str:
    """Readable text of every metric and counter, in torch_xla's metrics-report layout."""
    lines = []
    for name in metric_names():
        count, total, samples = metric_data(name)
        s = sorted(samples)
        pct = lambda q: s[min(len(s) - 1, int(q * len(s)))]
        timing = name.endswith("Time")
        fmt = _fmt_ns if timing else (lambda v: f"{v:.0f}")
        lines += [f"Metric: {name}", f"  TotalSamples: {count}",
                  f"  Accumulator: {fmt(total)}",
                  f"  Percentiles: 1%={fmt(pct(.01))}; 50%={fmt(pct(.5))}; 90%={fmt(pct(.9))}; 99%={fmt(pct(.99))}"]
    for name in counter_names():
        lines += [f"Counter: {name}", f"  Value: {_counters[name]}"]
    return "\n".join(lines) + ("\n" if lines else "")

"""The run report: the answer to "why does my model keep recompiling?" and "what fell back to the
CPU?" without a debug flag. Built from the metrics and events of this process; `save_report`
writes it as JSON, `lazyxla report FILE` prints a saved one."""
from __future__ import annotations

import atexit
import json
import os
import sys

from lazyxla import metrics

_COUNTERS = ("MarkStep", "UncachedCompile", "CachedCompile", "CompilationCacheEviction",
             "RecompileAfterEviction", "PersistentCacheHit", "PersistentCacheMiss",
             "PersistentCacheCorrupt", "DynamoExtractCompiledGraph", "DynamoRetrace", "RunCachedGraph",
             "ItemCall")
_METRICS = ("CompileTime", "ExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime",
            "DynamoSyncInputExecuteTime")


def collect() -> dict:
    """The report of this process as a JSON-able dict."""
    times = {}
    for name in _METRICS:
        d = metrics.metric_data(name)
        if d:
            times[name] = {"count": d[0], "total_ms": round(d[1] / 1e6, 3)}
    return {
        "counters": {k: metrics.counter_value(k) or 0 for k in _COUNTERS},
        "times": times,
        "graphs": [{k: e[k] for k in ("hash", "ops", "inputs", "outputs", "ms")}
                   for e in metrics.events("compile")],
        "retraces": [{"graph": e["graph"], "cause": e["cause"]} for e in metrics.events("retrace")],
        "partitions": [{"partitions": e["partitions"], "unsupported": e["unsupported"]}
                       for e in metrics.events("partition")],
        "fallbacks": [{"op": op, "count": sum(sites.values()), "sites": sites}
                      for op, sites in sorted(metrics.fallback_sites().items())],
    }


def render_text(rep: dict) -> str:
    c, lines = rep["counters"], []
    hits, misses = c["CachedCompile"], c["UncachedCompile"]
    lines.append("lazyxla run report")
    lines.append(f"  syncs (MarkStep): {c['MarkStep']}   compiled-graph replays: {c['RunCachedGraph']}")
    lines.append(f"  compilation cache: {misses} compiles, {hits} hits, {c['CompilationCacheEviction']} "
                 f"evictions, {c['RecompileAfterEviction']} recompiles after eviction")
    if c["PersistentCacheHit"] or c["PersistentCacheMiss"] or c["PersistentCacheCorrupt"]:
        lines.append(f"  persistent cache: {c['PersistentCacheHit']} hits, {c['PersistentCacheMiss']} "
                     f"misses, {c['PersistentCacheCorrupt']} corrupt entries recompiled")
    for name, t in rep["times"].items():
        lines.append(f"  {name}: {t['count']} x, {t['total_ms']:.1f} ms total")
    lines.append(f"graphs compiled ({len(rep['graphs'])}):")
    for g in rep["graphs"][-20:]:
        lines.append(f"  {g['hash'][:12]}  {g['ops']:5d} ops  {g['inputs']:4d} in  {g['outputs']:3d} out  "
                     f"{g['ms']:8.1f} ms")
    if len(rep["graphs"]) > 20:
        lines.append(f"  ... {len(rep['graphs']) - 20} earlier graphs not shown")
    lines.append(f"retraces ({len(rep['retraces'])}) — why the model recompiled:")
    for r in rep["retraces"][-20:]:
        lines.append(f"  {r['graph']}: {r['cause']}")
    lines.append(f"CPU fallbacks ({len(rep['fallbacks'])} ops):")
    for f in rep["fallbacks"]:
        lines.append(f"  {f['op']}: {f['count']} calls")
        for site, n in sorted(f["sites"].items(), key=lambda kv: -kv[1])[:3]:
            lines.append(f"      {n:5d} x  {site}")
    for p in rep["partitions"]:
        lines.append(f"  compiled region split into {p['partitions']} programs around {p['unsupported']}")
    return "\n".join(lines)


def report(as_json: bool = False) -> str:
    rep = collect()
    return json.dumps(rep, indent=2) if as_json else render_text(rep)


def save_report(path: str) -> None:
    with open(path, "w") as f:
        json.dump(collect(), f, indent=2)


def load_report(path: str) -> dict:
    """Read a saved report; it is data only (JSON), checked for the expected shape."""
    with open(path) as f:
        rep = json.load(f)
    if not isinstance(rep, dict) or not {"counters", "graphs", "retraces", "fallbacks"} <= rep.keys():
        raise ValueError(f"{path} is not a lazyxla run report")
    rep.setdefault("times", {})
    rep.setdefault("partitions", [])
    return rep


def _save_at_exit() -> None:
    path = os.environ.get("LAZYXLA_REPORT_PATH")
    if path:
        try:
            save_report(path)
        except OSError as e:  # at exit: said on stderr, the only place left to say it
            sys.stderr.write(f"lazyxla: could not write the run report to LAZYXLA_REPORT_PATH="
                             f"{path!r}: {e}\n")


atexit.register(_save_at_exit)

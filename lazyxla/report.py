"""The run report: the answer to "why does my model keep recompiling?" and "what fell back to the
CPU?" without a debug flag. Built from the metrics and events of this process; `save_report`
writes it as JSON, `lazyxla report FILE` prints a saved one."""
from __future__ import annotations

import atexit
import json
import os
import stat
import sys

from lazyxla import jaxenv, metrics

_COUNTERS = ("MarkStep", "UncachedCompile", "CachedCompile", "CompilationCacheEviction",
             "RecompileAfterEviction", "PersistentCacheHit", "PersistentCacheMiss",
             "PersistentCacheCorrupt", "DynamoExtractCompiledGraph", "DynamoRetrace", "RunCachedGraph",
             "ItemCall", "QuickCompile", "UpgradeCompile", "StagedSync", "MapLimitEviction",
             "DonatedInput", "DonationCopy")
_METRICS = ("CompileTime", "UpgradeCompileTime", "UpgradeWaitTime", "ExecuteTime",
            "TransferToDeviceTime", "TransferFromDeviceTime", "DynamoSyncInputExecuteTime")


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
        "graphs": [{**{k: e[k] for k in ("hash", "ops", "inputs", "outputs", "ms")},
                    "quick": e.get("quick", False), "offsets": e.get("offsets", 0)}
                   for e in metrics.events("compile")],
        "retraces": [{"graph": e["graph"], "cause": e["cause"]} for e in metrics.events("retrace")],
        "partitions": [{"partitions": e["partitions"], "unsupported": e["unsupported"]}
                       for e in metrics.events("partition")],
        "fallbacks": [{"op": op, "count": sum(sites.values()), "sites": sites}
                      for op, sites in sorted(metrics.fallback_sites().items())],
        "cpu_rounding": jaxenv.CPU_ROUNDING,
        "host_memory": jaxenv.HOST_MEMORY,
    }


def render_text(rep: dict) -> str:
    c, lines = rep["counters"], []
    hits, misses = c["CachedCompile"], c["UncachedCompile"]
    lines.append("lazyxla run report")
    lines.append(f"  syncs (MarkStep): {c['MarkStep']}   compiled-graph replays: {c['RunCachedGraph']}")
    lines.append(f"  compilation cache: {misses} compiles, {hits} hits, {c['CompilationCacheEviction']} "
                 f"evictions, {c['RecompileAfterEviction']} recompiles after eviction")
    if c.get("MapLimitEviction"):
        lines.append(f"  compiled programs evicted early at the memory-map cap (vm.max_map_count): "
                     f"{c['MapLimitEviction']}")
    if c["QuickCompile"]:
        lines.append(f"  shape variants compiled quick: {c['QuickCompile']}, {c['UpgradeCompile']} of them "
                     "reused enough to be compiled again optimized")
    if c.get("DonatedInput"):
        lines.append(f"  inputs donated to their programs (in-place updates written into the memory "
                     f"they replace): {c['DonatedInput']}, {c.get('DonationCopy', 0)} of them fed "
                     "as copies (their data was held elsewhere)")
    if c.get("StagedSync"):
        lines.append(f"  syncs run in stages (their shape-varying part apart): {c['StagedSync']}")
    if c["PersistentCacheHit"] or c["PersistentCacheMiss"] or c["PersistentCacheCorrupt"]:
        lines.append(f"  persistent cache: {c['PersistentCacheHit']} hits, {c['PersistentCacheMiss']} "
                     f"misses, {c['PersistentCacheCorrupt']} corrupt entries recompiled")
    for name, t in rep["times"].items():
        lines.append(f"  {name}: {t['count']} x, {t['total_ms']:.1f} ms total")
    lines.append(f"graphs compiled ({len(rep['graphs'])}):")
    for g in rep["graphs"][-20:]:
        lines.append(f"  {g['hash'][:12]}  {g['ops']:5d} ops  {g['inputs']:4d} in  {g['outputs']:3d} out  "
                     f"{g['ms']:8.1f} ms{'  (quick)' if g.get('quick') else ''}"
                     + (f"  ({g['offsets']} slice start{'s' if g['offsets'] > 1 else ''} fed)"
                        if g.get("offsets") else ""))
    if len(rep["graphs"]) > 20:
        lines.append(f"  ... {len(rep['graphs']) - 20} earlier graphs not shown")
    lines.append(f"retraces ({len(rep['retraces'])}) — why the model recompiled:")
    for r in rep["retraces"][-20:]:
        # (one line each: a saved cause's newline could otherwise forge lines of the report)
        lines.append(f"  {r['graph']}: {r['cause']}".replace("\n", "\\n").replace("\r", "\\r"))
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
    text = json.dumps(collect(), indent=2)
    # Opened without blocking: a FIFO that no process reads is an OSError (ENXIO) here, where a
    # plain open() waited for a reader forever (at exit: a process that never ended). A FIFO that
    # is being read gets the report as a file would.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
    os.set_blocking(fd, True)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(text)


def load_report(path: str) -> dict:
    """Read a saved report: data only (JSON), every field checked for its type before use, so a
    damaged or foreign file is a ValueError naming what is wrong, never a crash while printing."""
    try:
        # (not a FIFO, which would block, nor a device such as /dev/zero, read without end)
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a lazyxla run report: not a regular file")
        if st.st_size > _MAX_REPORT_BYTES:
            raise ValueError(f"{path} is not a lazyxla run report: {st.st_size} bytes, over "
                             f"{_MAX_REPORT_BYTES}")
        with open(path, encoding="utf-8") as f:
            rep = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not a lazyxla run report: not JSON text ({e})") from None
    except RecursionError:  # ([[[[...]]]] deeper than Python's parser recurses)
        raise ValueError(f"{path} is not a lazyxla run report: JSON nested too deeply") from None
    if not isinstance(rep, dict) or not {"counters", "graphs", "retraces", "fallbacks"} <= rep.keys():
        raise ValueError(f"{path} is not a lazyxla run report")
    rep.setdefault("times", {})
    rep.setdefault("partitions", [])
    problem = _problem(rep)
    if problem:
        raise ValueError(f"{path} is not a lazyxla run report: {problem}")
    rep["counters"] = {**{k: 0 for k in _COUNTERS}, **rep["counters"]}  # (an older report's)
    return rep


_MAX_REPORT_BYTES = 1 << 30  # (a report is kilobytes; the events kept are capped at 4096)
_NUM, _STR = (int, float), str
# field -> the type of each entry's values, for the report's lists and dicts of records
_RECORDS = {"graphs": {"hash": _STR, "ops": int, "inputs": int, "outputs": int, "ms": _NUM},
            "retraces": {"graph": _STR, "cause": _STR},
            "partitions": {"partitions": int, "unsupported": list},
            "fallbacks": {"op": _STR, "count": int, "sites": dict},
            "times": {"count": int, "total_ms": _NUM}}
# the fields a record may lack (older reports), checked where present
_OPTIONAL = {"graphs": {"quick": bool, "offsets": int}}


def _problem(rep) -> str | None:
    """What makes `rep` unprintable, or None."""
    if not isinstance(rep["counters"], dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in rep["counters"].values()):
        return "counters must map names to integers"
    for field, fields in _RECORDS.items():
        value = rep[field]
        records = value.values() if field == "times" and isinstance(value, dict) else value
        if not isinstance(value, dict if field == "times" else list):
            return f"{field} has the wrong type ({type(value).__name__})"
        for r in records:
            if not isinstance(r, dict) or any(not isinstance(r.get(k), t) or isinstance(r.get(k), bool)
                                              for k, t in fields.items()):
                return f"an entry of {field} lacks one of {', '.join(fields)} or has the wrong type"
            for k, t in _OPTIONAL.get(field, {}).items():
                if k in r and (not isinstance(r[k], t) or (t is int and isinstance(r[k], bool))):
                    return f"{field}' {k} must be {t.__name__}"
    if not all(isinstance(n, int) for f in rep["fallbacks"] for n in f["sites"].values()):
        return "fallbacks' sites must map source lines to call counts"
    return None


def _save_at_exit() -> None:
    path = os.environ.get("LAZYXLA_REPORT_PATH")
    if path and path.strip():  # (blank: unset, as every other flag reads it; " " was a file name)
        try:
            save_report(path)
        except OSError as e:  # at exit: said on stderr, the only place left to say it
            sys.stderr.write(f"lazyxla: could not write the run report to LAZYXLA_REPORT_PATH="
                             f"{path!r}: {e}\n")


atexit.register(_save_at_exit)

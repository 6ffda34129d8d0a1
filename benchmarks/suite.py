"""The benchmark suite: lazyxla against eager PyTorch, inductor and the bare XLA executable
(and, with --peer-python, torch_xla and torchax), each system in its own subprocess.

    lazyxla bench            # full: 4 workloads x {infer, train} x 4 systems + dynamic lengths
    lazyxla bench --quick    # MLP only + 20 dynamic lengths (< 3 min on 2 cores)
    lazyxla bench --peer-python /path/to/torch_xla-venv/bin/python --peer-python /path/to/torchax-venv/bin/python
    lazyxla bench --profile  # cProfile of the compiled MLP inference call -> results/profile.txt

Writes benchmarks/results/results.md, results.json and chart.png.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import tempfile
import sys
import time
from pathlib import Path

from .workloads import WORKLOADS, describe

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
LOCAL_SYSTEMS = ("eager", "inductor", "lazy", "compiled")
LABEL = {"eager": "eager (CPU)", "eager_here": "eager (CPU), timed in the lazy process",
         "inductor": "torch.compile inductor", "lazy": "lazyxla lazy (sync/step)",
         "lazy_pipelined": "lazyxla lazy, pipelined (wait per 10 steps)",
         "compiled": "lazyxla torch.compile", "direct": "direct XLA (floor)",
         "direct_cold": "direct XLA, cold L2", "direct_polled": "direct XLA, polled wait", "dynamo_floor": "Dynamo floor (no-op backend + direct)",
         "torch_xla_lazy": "torch_xla lazy", "torch_xla": "torch_xla openxla", "torchax": "torchax jit"}
# Other processes' CPU use while a job ran, in cores (its own, and the suite's, excluded): above
# this the machine was shared and the latencies are noisy. (The load average cannot tell: the
# jobs themselves keep it near 1-2 on 2 CPUs.)
LOADED = 0.25


def _busy_cpu_seconds() -> float | None:
    """CPU seconds spent busy since boot by every process (/proc/stat); None where unreadable."""
    try:
        with open("/proc/stat") as f:
            # user nice system idle iowait irq softirq steal
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    own = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(r.ru_utime + r.ru_stime for r in own)


def run_child(module: str, args, env: dict, what: str) -> dict:
    """`python -m module *args` in a process of its own (the benchmarks that compare settings read
    at process start: malloc's, lazyxla's environment); its last `RESULT <json>` line."""
    p = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=900)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode or not lines:
        raise RuntimeError(f"{what}: exited {p.returncode}: {p.stderr.strip()[-800:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _env(threads: int, extra_pythonpath: bool = True) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("LAZYXLA_BENCH_XLA_FLAGS") or
                        f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}")
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    env["PJRT_DEVICE"] = "CPU"
    env["JAX_PLATFORMS"] = "cpu"
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    # First calls are cold compiles on both sides: no persistent caches from earlier runs.
    env.pop("LAZYXLA_PERSISTENT_CACHE_PATH", None)
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_job(job: dict, python: str, threads: int, timeout: float) -> dict:
    job = dict(job, threads=threads)
    load = os.getloadavg()[0]
    busy0, own0 = _busy_cpu_seconds(), _own_cpu_seconds()
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="lazyxla-bench-") as cache:
            env = dict(_env(threads), TORCHINDUCTOR_CACHE_DIR=cache)  # a cold inductor per job
            p = subprocess.run([python, "-m", "benchmarks.worker", json.dumps(job)], cwd=ROOT,
                               env=env, capture_output=True, text=True, timeout=timeout)
        line = next((l for l in reversed(p.stdout.splitlines()) if l.startswith("RESULT ")), None)
        if line is None:
            tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
            res = {"ok": False, "error": f"worker exited {p.returncode}: " + " | ".join(tail)}
        else:
            res = json.loads(line[len("RESULT "):])
    except subprocess.TimeoutExpired:
        res = {"ok": False, "error": f"timed out after {timeout:.0f}s"}
    res.update({k: job[k] for k in ("system", "workload", "mode")})
    res["loadavg_start"] = load
    res["wall_s"] = time.perf_counter() - t0
    busy1 = _busy_cpu_seconds()
    if busy0 is not None and busy1 is not None:  # (the job's CPU time counts once it has exited)
        others = (busy1 - busy0) - (_own_cpu_seconds() - own0)
        res["other_cpu_cores"] = max(0.0, others) / max(res["wall_s"], 1e-9)
    res["python"] = python
    return res


def peer_systems(python: str, why: dict | None = None) -> list[str]:
    """Which peer systems `python` can run: torch_xla (lazy + openxla) and/or torchax. `why`
    collects, per module that does not import, the last line of its error."""
    found = []
    probe = "import torch, sys; print(torch.__version__); import {mod}"
    for mod, systems in (("torch_xla", ["torch_xla_lazy", "torch_xla"]), ("torchax", ["torchax"])):
        try:
            r = subprocess.run([python, "-c", probe.format(mod=mod)], capture_output=True,
                               text=True, timeout=120, env=_env(1))
            if r.returncode == 0:
                found += systems
            elif why is not None:
                err = (r.stderr.strip().splitlines() or ["no output"])[-1]
                torch_v = (r.stdout.strip().splitlines() or ["?"])[0]
                why[mod] = f"import fails with torch {torch_v}: {err[:200]}"
        except Exception as e:
            if why is not None:
                why[mod] = f"could not run {python}: {e}"
    return found


def plan(quick: bool, workloads=None, modes=None, systems=None):
    wls = workloads or (("mlp",) if quick else WORKLOADS)
    modes = modes or ("infer", "train")
    systems = systems or LOCAL_SYSTEMS
    it = {"warmup": 3, "iters": 200 if quick else 300, "max_seconds": 4 if quick else 20}
    return [dict(it, system=s, workload=w, mode=m) for w in wls for m in modes for s in systems]


def command_line(quick=False, threads=1, workloads=None, modes=None, systems=None, dynamic=True) -> str:
    """The `lazyxla bench` options a run was given (peers are listed apart), for its report."""
    parts = ["lazyxla bench"] + (["--quick"] if quick else []) + \
        ([f"--threads {threads}"] if threads != 1 else []) + \
        [f"--{name} {','.join(v)}" for name, v in (("workloads", workloads), ("modes", modes),
                                                 ("systems", systems)) if v] + \
        ([] if dynamic else ["--no-dynamic"])
    return " ".join(parts)


def main(quick=False, peer_python=(), threads=1, workloads=None, modes=None, systems=None,
         dynamic=True, out_dir=None, timeout=None) -> int:
    out_dir = Path(out_dir) if out_dir else RESULTS
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # (a file of that name, a parent that cannot hold directories)
        print(f"lazyxla bench: --out {out_dir}: {e.strerror or e}", file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    timeout = timeout or (240 if quick else 900)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "quick": quick, "threads": threads,
            "xla_flags": _env(threads)["XLA_FLAGS"], "loadavg_start": os.getloadavg(),
            "cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0],
            "command": command_line(quick, threads, workloads, modes, systems, dynamic)}
    try:
        import torch
        import jax
        meta["torch"], meta["jax"] = torch.__version__, jax.__version__
    except Exception:
        pass
    jobs = [(j, sys.executable) for j in plan(quick, workloads, modes, systems)]
    peers = {}
    for py in peer_python or ():
        why = {}
        found = peer_systems(py, why)
        peers[py] = {"systems": found, "unavailable": why}
        jobs += [(j, py) for j in plan(quick, workloads, modes, found)] if found else []
    meta["peers"] = peers or "not given (--peer-python): torch_xla and torchax not available"
    results = []
    for job, py in jobs:
        r = run_job(job, py, threads, timeout)
        results.append(r)
        _progress(r)
    r = run_job({"system": "lazy", "workload": "ops", "mode": "record", "quick": quick}, sys.executable,
                threads, timeout)
    results.append(r)
    _progress(r)
    if dynamic:
        n = 20 if quick else 100
        for s in (("compiled",) if quick else ("compiled", "inductor")):
            r = run_job({"system": s, "workload": "dyn", "mode": "dynamic", "n_lengths": n}, sys.executable,
                        threads, timeout * 2)
            results.append(r)
            _progress(r)
    meta["loadavg_end"] = os.getloadavg()
    meta["wall_s"] = time.perf_counter() - t_start
    meta["max_loadavg"] = max([meta["loadavg_start"][0], meta["loadavg_end"][0]] +
                              [r.get("loadavg_start", 0) for r in results] +
                              [r.get("loadavg_end", 0) or 0 for r in results])
    others = [r["other_cpu_cores"] for r in results if r.get("other_cpu_cores") is not None]
    meta["max_other_cpu"] = max(others) if others else None
    meta["mean_other_cpu"] = sum(others) / len(others) if others else None
    meta["under_load"] = bool(others) and meta["max_other_cpu"] > LOADED
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1,
                                                     default=float))
    md = render(meta, results)
    (out_dir / "results.md").write_text(md)
    try:
        chart(results, out_dir / "chart.png", meta)
    except Exception as e:  # the table matters more than the picture
        print(f"chart failed: {e}", file=sys.stderr)
    print(md)
    print(f"wrote {out_dir}/results.md, results.json, chart.png in {meta['wall_s']:.0f}s")
    return 0


def _progress(r):
    if r.get("ok"):
        if r["mode"] == "record":
            within = sum(x["ok"] for x in r["rows"])
            print(f"  {'lazy':>16} recording: {within} of {len(r['rows'])} calls within the budget per op",
                  flush=True)
        elif r["mode"] == "dynamic":
            print(f"  {r['system']:>16} dyn: {r['n_lengths']} lengths, {r['compiles']} compiles, "
                  f"{r['total_s']:.1f}s", flush=True)
        else:
            print(f"  {r['system']:>16} {r['workload']:>11} {r['mode']:>5}: median {r['median_ms']:.3f} ms, "
                  f"first {r['first_s']:.2f}s  ({r['wall_s']:.0f}s)", flush=True)
    else:
        print(f"  {r['system']:>16} {r['workload']:>11} {r['mode']:>5}: FAILED {r.get('error', '')[:200]}",
              flush=True)


# ---------------------------------------------------------------- report

def rows(results):
    """(workload, mode) -> {system: result}, with the direct floor as its own system."""
    table = {}
    for r in results:
        if r["mode"] in ("dynamic", "record"):
            continue
        t = table.setdefault((r["workload"], r["mode"]), {})
        t[r["system"]] = r
        if r["system"] == "compiled" and r.get("ok") and r.get("direct"):
            d = dict(r["direct"], ok=True, system="direct", first_s=r.get("xla_compile_first_s"),
                     compiles_first=r.get("compiles_first"), compiles_steady=0)
            t["direct"] = d
            if d.get("cold"):
                t["direct_cold"] = dict(d["cold"], ok=True, system="direct_cold")
            if d.get("polled"):
                t["direct_polled"] = dict(d["polled"], ok=True, system="direct_polled")
            if r.get("dynamo_floor"):
                t["dynamo_floor"] = dict(r["dynamo_floor"], ok=True, system="dynamo_floor")
        if r["system"] == "lazy" and r.get("ok") and r.get("pipelined"):
            t["lazy_pipelined"] = dict(r["pipelined"], ok=True, system="lazy_pipelined")
        if r["system"] == "lazy" and r.get("ok") and r.get("eager_here"):
            t["eager_here"] = dict(r["eager_here"], ok=True, system="eager_here")
    return table


def _f(x, fmt="{:.3f}"):
    return "—" if x is None else fmt.format(x)


def _ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def render(meta, results) -> str:
    L = []
    L.append("# lazyxla benchmarks\n")
    if meta["under_load"]:
        L.append(f"> **Taken under load**: other processes used up to {meta['max_other_cpu']:.2f} "
                 f"of {meta['cpus']} CPUs (> {LOADED}) while a job ran — latencies are noisy; "
                 "rerun on a quiet machine for final numbers.\n")
    L.append(f"- Command: `{meta['command']}`; started {meta['started']}, took {meta['wall_s']:.0f}s")
    L.append(f"- torch {meta.get('torch')}, jax {meta.get('jax')}, Python {meta['python']}, "
             f"{meta['platform']}, {meta['cpus']} CPUs")
    L.append(f"- Threads pinned the same for every system: torch.set_num_threads({meta['threads']}), "
             f"OMP/MKL_NUM_THREADS={meta['threads']}, XLA_FLAGS=`{meta['xla_flags']}` (set before jax import); "
             f"each XLA runtime (lazyxla's JAX, torch_xla) started with its CPU affinity set to "
             f"{meta['threads']} core(s), since XLA sizes its thread pools by it and the flags no longer cap "
             f"them, then the main thread given every core back (it records and dispatches while XLA runs)")
    rounding = sorted({r["cpu_rounding"] for r in results if r.get("cpu_rounding")})
    if rounding:
        L.append(f"- lazyxla's XLA CPU code: {'; '.join(rounding)} (benchmarks/cpu_rounding.py "
                 "measures what that costs)")
    host = sorted({r["host_memory"] for r in results if r.get("host_memory")})
    if host:
        L.append(f"- lazyxla's host memory: {'; '.join(host)} (benchmarks/host_malloc.py measures "
                 "what that gains; the eager and inductor processes keep glibc's defaults)")
    la0, la1 = meta["loadavg_start"], meta["loadavg_end"]
    L.append(f"- Load average (1/5/15 min): start {la0[0]:.2f}/{la0[1]:.2f}/{la0[2]:.2f}, "
             f"end {la1[0]:.2f}/{la1[1]:.2f}/{la1[2]:.2f}; max seen {meta['max_loadavg']:.2f} "
             "(the jobs' own load included)")
    if meta.get("max_other_cpu") is not None:
        L.append(f"- Other processes' CPU use while the jobs ran (/proc/stat less the jobs' own "
                 f"CPU time): mean {meta['mean_other_cpu']:.2f}, max {meta['max_other_cpu']:.2f} "
                 f"cores (quiet: <= {LOADED})")
    peers = meta["peers"]
    if isinstance(peers, dict):
        for py, st in peers.items():
            found = ", ".join(st["systems"]) or "none"
            L.append(f"- Peer python `{py}`: runs {found}")
            for mod, why in st["unavailable"].items():
                L.append(f"  - {mod}: {_oneline(why)}")
    else:
        L.append(f"- Peers: {peers}")
    L.append("- Latency: steady-state wall time per call after warm-up, blocking until the result is "
             "ready (lazyxla.sync()+wait(), jax.block_until_ready, CPU is synchronous). "
             "First call: the first step including tracing and compiles. Compiles: XLA compiles "
             "(`UncachedCompile`) on the first call / after warm-up. RSS: peak host RSS "
             "(ru_maxrss) after the first call.")
    L.append("- direct = the executables lazyxla compiled under torch.compile for that step, called "
             "through JAX on the inputs lazyxla fed them (pre-converted device arrays), in the same "
             "process, timed in rounds of 10 calls alternating with the system's own; the inputs "
             "an executable takes as donated (an in-place update's old data, which the run "
             "consumes) are fresh copies made before each call, untimed; its "
             "first-call column is the XLA compile time (lowering + XLA) of those executables.")
    L.append("- direct, cold L2 = the same calls, each after reading an unrelated 8 MB array (not "
             "timed): the executable as any real caller sees it, with its weights no longer in the "
             "L1/L2 caches. Dynamo floor = torch.compile with backends whose compiled functions only "
             "call the captured executables on their captured inputs (training: aot_autograd's "
             "forward and backward compilers and the optimizer step's backend, handing back fresh "
             "aliases of outputs made once) and which wait for the outputs as lazyxla.wait() does: "
             "the least any torch.compile backend can cost per call or step for these executables.")
    L.append("- direct, polled wait = the same calls, waiting for their outputs as lazyxla.wait() "
             "does (on the CPU backend: polling for up to LAZYXLA_SPIN_WAIT_US before blocking), "
             "where direct blocks at once as JAX's block_until_ready does.")
    L.append("- eager, timed in the lazy process = the same eager step on the CPU, timed in the lazy "
             "job's process in rounds alternating with lazy mode's: the lazy/eager targets use it, "
             "so a slow phase of the machine during one job does not decide them.")
    L.append("- lazy, pipelined = lazy mode as a training loop runs it: sync() after each step, "
             "which dispatches the step's program and returns, so XLA (one thread) executes step n "
             "while Python (one thread) records step n+1; wait() once per 10 steps; time per step. "
             "It uses a second core for the overlap; eager cannot overlap its steps.")
    L.append("- Training step = forward + loss, backward, AdamW step, zero_grad; under torch.compile "
             "(inductor and lazyxla) the forward+loss function and `opt.step` are each compiled.\n")
    L.append("## Workloads\n")
    for k, v in describe().items():
        L.append(f"- **{k}**: {v}")
    L.append("")
    table = rows(results)
    order = ["eager", "eager_here", "inductor", "lazy", "lazy_pipelined", "compiled", "dynamo_floor", "direct", "direct_cold", "direct_polled",
             "torch_xla_lazy", "torch_xla", "torchax"]
    L.append("## Steady-state latency\n")
    L.append("| workload | mode | system | median ms | p90 ms | vs eager | vs direct | first call s | "
             "XLA compiles first/steady | peak RSS MB |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (w, m), t in table.items():
        eager = t.get("eager", {}).get("median_ms") if t.get("eager", {}).get("ok") else None
        direct = t.get("direct", {}).get("median_ms") if "direct" in t else None
        for s in order:
            r = t.get(s)
            if r is None:
                continue
            if not r.get("ok"):
                L.append(f"| {w} | {m} | {LABEL.get(s, s)} | **error**: {_oneline(r.get('error'))} | | | | | | |")
                continue
            med = r["median_ms"]
            comp = f"{r.get('compiles_first', 0) or 0}/{r.get('compiles_steady', 0) or 0}" \
                if s in ("lazy", "compiled", "direct", "torch_xla_lazy", "torch_xla") else "—"
            L.append(f"| {w} | {m} | {LABEL.get(s, s)} | {med:.3f} | {r['p90_ms']:.3f} | "
                     f"{_f(_ratio(med, eager), '{:.2f}x')} | {_f(_ratio(med, direct), '{:.2f}x')} | "
                     f"{_f(r.get('first_s'), '{:.2f}')} | {comp} | {_f(r.get('rss_first_mb'), '{:.0f}')} |")
    L.append("")
    L += targets(table)
    for r in results:
        if r["mode"] == "record":
            from .record_ops import render as render_record
            L += (render_record(r["rows"]) if r.get("ok") else
                  ["## Recording in lazy mode", "", f"**error**: {_oneline(r.get('error'))}"]) + [""]
    dyn = [r for r in results if r["mode"] == "dynamic"]
    if dyn:
        L.append("## Dynamic lengths: torch.compile(dynamic=True), one transformer block (d 64), "
                 "batch 1, distinct sequence lengths 16, 17, ...\n")
        L.append("| system | lengths | XLA compiles | Dynamo graphs | total s | median per call ms | "
                 "2nd pass over same lengths s |")
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        for r in dyn:
            if not r.get("ok"):
                L.append(f"| {LABEL.get(r['system'])} | **error**: {_oneline(r.get('error'))} | | | | | |")
                continue
            L.append(f"| {LABEL.get(r['system'])} | {r['n_lengths']} | {_f(r.get('compiles'), '{}')} | "
                     f"{_f(r.get('dynamo_frames'), '{}')} | {r['total_s']:.2f} | {r['median_ms']:.2f} | "
                     f"{_f(r.get('second_pass_s'), '{:.2f}')} |")
        L.append("")
    L.append("![chart](chart.png)\n")
    return "\n".join(L) + "\n"


def _oneline(s):
    return (s or "").replace("\n", " ").replace("|", "/")[:300]


def targets(table) -> list[str]:
    L = ["## Targets (measured)\n"]
    L.append("| workload | mode | compiled/direct (<= 1.10) | compiled/direct, cold L2 | "
             "compiled/direct, polled wait | "
             "compiled/Dynamo floor | lazy/eager (MLP train < 1.5) | lazy pipelined/eager | first call s | "
             "1.5 x XLA compile + Dynamo s | first-call target | inductor first call / ours (>= 5) | "
             "compiled/torch_xla openxla (<= 0.5) | lazy/torch_xla lazy (<= 1) |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for (w, m), t in table.items():
        c, ind = t.get("compiled"), t.get("inductor")
        ok = lambda r: r is not None and r.get("ok")  # noqa: E731
        med = lambda k: t[k]["median_ms"] if ok(t.get(k)) else None  # noqa: E731
        cd = _ratio(med("compiled"), med("direct"))
        cold = _ratio(med("compiled"), med("direct_cold"))
        polled = _ratio(med("compiled"), med("direct_polled"))
        floor = _ratio(med("compiled"), med("dynamo_floor"))
        # against eager timed in the lazy process where there is one (alternating rounds: the
        # same phases of the machine), else against the eager job's own run
        eager = med("eager_here") if ok(t.get("eager_here")) else med("eager")
        le = _ratio(med("lazy"), eager)
        lp = _ratio(med("lazy_pipelined"), eager)
        first = c.get("first_s") if ok(c) else None
        bound = None
        if ok(c) and c.get("xla_compile_first_s") is not None and c.get("dynamo_s") is not None:
            bound = 1.5 * c["xla_compile_first_s"] + c["dynamo_s"]
        verdict = lambda x, lim, strict=False: "—" if x is None else (  # noqa: E731
            f"{x:.2f} {'ok' if (x < lim if strict else x <= lim) else 'MISS'}")
        fc = "—" if first is None or bound is None else ("ok" if first <= bound else "MISS")
        vs_ind = _ratio(ind.get("first_s"), first) if ok(ind) else None
        vs_ind = "—" if vs_ind is None else f"{vs_ind:.1f} {'ok' if vs_ind >= 5 else 'MISS'}"
        L.append(f"| {w} | {m} | {verdict(cd, 1.10)} | {_f(cold, '{:.2f}')} | {_f(polled, '{:.2f}')} | "
                 f"{_f(floor, '{:.2f}')} | "
                 f"{verdict(le, 1.5, True) if (w, m) == ('mlp', 'train') else _f(le, '{:.2f}')} | "
                 f"{verdict(lp, 1.5, True) if (w, m) == ('mlp', 'train') else _f(lp, '{:.2f}')} | "
                 f"{_f(first, '{:.2f}')} | {_f(bound, '{:.2f}')} | {fc} | {vs_ind} | "
                 f"{verdict(_ratio(med('compiled'), med('torch_xla')), 0.5)} | "
                 f"{verdict(_ratio(med('lazy'), med('torch_xla_lazy')), 1.0)} |")
    L.append("\nDynamo time = torch._dynamo's frame-compile time (includes aot_autograd tracing); "
             "XLA compile = lowering + XLA compile of every executable built during the first call. "
             "lazy/eager and lazy pipelined/eager divide by eager timed in the lazy process, in "
             "rounds alternating with lazy mode's, where the run has it.\n")
    return L


def chart(results, path, meta):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    table = rows(results)
    groups = list(table)
    systems = [s for s in ["eager", "inductor", "lazy", "lazy_pipelined", "compiled", "dynamo_floor", "direct", "direct_cold", "direct_polled",
                           "torch_xla_lazy", "torch_xla", "torchax"] if any(s in t for t in table.values())]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) + 2), 4.5))
    width = 0.8 / max(1, len(systems))
    for i, s in enumerate(systems):
        xs, ys = [], []
        for g, key in enumerate(groups):
            r = table[key].get(s)
            if r and r.get("ok"):
                xs.append(g + i * width)
                ys.append(r["median_ms"])
        ax.bar(xs, ys, width, label=LABEL.get(s, s))
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{w}\n{m}" for w, m in groups])
    ax.set_yscale("log")
    ax.set_ylabel("median ms per call (log)")
    title = f"lazyxla benchmarks, {meta['threads']} thread(s)"
    if meta["under_load"]:
        title += f" — under load (others used {meta['max_other_cpu']:.2f} CPUs)"
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def profile(out_dir=None, calls=3000, threads=1) -> int:
    """cProfile the compiled MLP inference call, in a subprocess (benchmarks/profile_call.py)."""
    out_dir = Path(out_dir) if out_dir else RESULTS
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # (a file of that name, a parent that cannot hold directories)
        print(f"lazyxla bench: --out {out_dir}: {e.strerror or e}", file=sys.stderr)
        return 2
    p = subprocess.run([sys.executable, "-m", "benchmarks.profile_call", str(out_dir / "profile.txt"),
                        str(calls), str(threads)], cwd=ROOT, env=_env(threads))
    return p.returncode


def cli(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="lazyxla bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    args = ap.parse_args(argv)
    problem = check_arguments(args)
    if problem:
        ap.error(problem)  # exit status 2 and the usage, before any job runs
    return run_from_args(args)


def check_arguments(args) -> str | None:
    """What is wrong with the command line, or None: an unknown workload, mode or system would
    otherwise run nothing (or everything) and still write a report."""
    if args.threads < 1:
        return f"--threads must be at least 1, got {args.threads}"
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        return f"--out {args.out} is a file, not a directory"
    for option, valid in (("workloads", WORKLOADS), ("modes", ("infer", "train")),
                          ("systems", LOCAL_SYSTEMS)):
        given = getattr(args, option)
        unknown = [v for v in given.split(",") if v not in valid] if given is not None else []
        if unknown:  # ("--workloads=" gives [""])
            peers = " (torch_xla and torchax run from --peer-python)" if option == "systems" else ""
            return f"--{option}: unknown {unknown}; choose from {','.join(valid)}{peers}"
    return None


def add_arguments(ap):
    ap.add_argument("--quick", action="store_true", help="MLP only, fewer iterations, 20 dynamic lengths")
    ap.add_argument("--peer-python", action="append", default=[], metavar="PATH",
                    help="python of a virtualenv with torch_xla and/or torchax (repeatable)")
    ap.add_argument("--threads", type=int, default=1, help="threads for every system (default 1)")
    ap.add_argument("--workloads", help=f"comma list of {','.join(WORKLOADS)}")
    ap.add_argument("--modes", help="comma list of infer,train")
    ap.add_argument("--systems", help=f"comma list of {','.join(LOCAL_SYSTEMS)}")
    ap.add_argument("--no-dynamic", action="store_true", help="skip the dynamic-length experiment")
    ap.add_argument("--out", help="output folder (default benchmarks/results)")
    ap.add_argument("--profile", action="store_true",
                    help="only profile the compiled MLP inference call (results/profile.txt)")


def run_from_args(args) -> int:
    if args.profile:
        return profile(args.out, threads=args.threads)
    split = lambda s: tuple(s.split(",")) if s else None  # noqa: E731
    return main(quick=args.quick, peer_python=args.peer_python, threads=args.threads,
                workloads=split(args.workloads), modes=split(args.modes), systems=split(args.systems),
                dynamic=not args.no_dynamic, out_dir=args.out)


if __name__ == "__main__":
    sys.exit(cli())

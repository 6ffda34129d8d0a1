"""Lazy mode with glibc's malloc defaults against the settings README's "Host memory on the CPU
backend" gives (read by glibc at process start, so each side runs in its own process; the two
alternate, round after round, so a slow phase of the machine does not decide one side).

    python -m benchmarks.host_malloc                          # the suite's 8 workloads, 2 rounds
    python -m benchmarks.host_malloc --jobs cnn:infer,gpt:train --rounds 3

Per job: the median step (sync + wait), minor page faults per step, peak RSS. Writes
benchmarks/results/host_malloc.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import resource
import statistics
import sys
import time

RECIPE = {"MALLOC_ARENA_MAX": "1", "MALLOC_TRIM_THRESHOLD_": "1073741824", "MALLOC_MMAP_MAX_": "0"}
JOBS = "mlp:infer,mlp:train,transformer:infer,transformer:train,cnn:infer,cnn:train,gpt:infer,gpt:train"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def child(workload: str, mode: str, seconds: float) -> dict:
    """One process: lazy mode's step, timed after warm-up."""
    from benchmarks import worker
    worker.start_xla_runtime("lazy", 1)
    runner = worker.Runner({"system": "lazy", "workload": workload, "mode": mode, "threads": 1})
    runner.setup()
    for _ in range(5):
        runner.block(runner.step())
    faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # noqa: E731
    f0, times, t_end = faults(), [], time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(times) < 10:
        t = time.perf_counter()
        runner.block(runner.step())
        times.append(time.perf_counter() - t)
    return {"median_ms": statistics.median(times) * 1e3, "faults_per_step": (faults() - f0) / len(times),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "steps": len(times)}


def _run(workload, mode, seconds, recipe: bool) -> dict:
    from benchmarks.suite import _env, run_child
    env = {k: v for k, v in _env(1).items() if not k.startswith("MALLOC_")}
    if recipe:
        env.update(RECIPE)
    return run_child("benchmarks.host_malloc", ["--child", workload, mode, str(seconds)], env,
                     f"{workload} {mode}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default=JOBS, help=f"comma list of workload:mode (default {JOBS})")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per process")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "host_malloc.md"))
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        workload, mode, seconds = args.child
        print("RESULT " + json.dumps(child(workload, mode, float(seconds))), flush=True)
        return 0
    from benchmarks.worker import parse_jobs, write_report
    jobs = [tuple(j.split(":")) for j in parse_jobs(ap, args.jobs)]
    if args.rounds < 1 or args.seconds <= 0:
        ap.error("--rounds must be at least 1 and --seconds above 0")
    rows = []
    for workload, mode in jobs:
        runs = {False: [], True: []}
        for _ in range(args.rounds):
            for recipe in (False, True):
                runs[recipe].append(_run(workload, mode, args.seconds, recipe))
        med = {r: {k: statistics.median(x[k] for x in runs[r]) for k in runs[r][0]} for r in runs}
        rows.append((workload, mode, med[False], med[True]))
        print(f"{workload} {mode}: {med[False]['median_ms']:.2f} -> {med[True]['median_ms']:.2f} ms", flush=True)
    lines = ["# Lazy mode: glibc's malloc defaults against README's settings", "",
             f"`python -m benchmarks.host_malloc --jobs {args.jobs} --rounds {args.rounds}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}; settings: "
             + " ".join(f"{k}={v}" for k, v in RECIPE.items())
             + f". One core for XLA, as in the suite; each side in its own process, alternating; "
             f"medians over {args.rounds} rounds of each process's median step.", "",
             "| workload | mode | defaults ms | settings ms | ratio | page faults a step, defaults | "
             "settings | peak RSS MB, defaults | settings |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for workload, mode, d, s in rows:
        lines.append(f"| {workload} | {mode} | {d['median_ms']:.2f} | {s['median_ms']:.2f} | "
                     f"{s['median_ms'] / d['median_ms']:.2f} | {d['faults_per_step']:.0f} | "
                     f"{s['faults_per_step']:.0f} | {d['rss_mb']:.0f} | {s['rss_mb']:.0f} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

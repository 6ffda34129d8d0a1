"""Lazy mode with glibc's malloc defaults (LAZYXLA_HOST_MALLOC=0) against the setting lazyxla makes
at import (lazyxla/host_malloc.py: freed memory kept for the next run). Each side runs in its own
process; the two alternate, round after round, so a slow phase of the machine does not decide one
side.

    python -m benchmarks.host_malloc                          # the suite's 8 workloads, 2 rounds
    python -m benchmarks.host_malloc --jobs cnn:infer,gpt:train --rounds 3

Per job: the median step (sync + wait), minor page faults per step, peak RSS. Writes
benchmarks/results/host_malloc.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

SIDES = {False: {"LAZYXLA_HOST_MALLOC": "0"}, True: {"LAZYXLA_HOST_MALLOC": "1"}}  # kept: True
JOBS = "mlp:infer,mlp:train,transformer:infer,transformer:train,cnn:infer,cnn:train,gpt:infer,gpt:train"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def child(workload: str, mode: str, seconds: float) -> dict:
    """One process: lazy mode's step, timed after warm-up."""
    from benchmarks.worker import steady_state
    from lazyxla.jaxenv import HOST_MEMORY
    return dict(steady_state(workload, mode, "lazy", seconds), host_memory=HOST_MEMORY)


def _run(workload, mode, seconds, kept: bool) -> dict:
    from benchmarks.suite import _env, run_child
    env = {k: v for k, v in _env(1).items() if not k.startswith("MALLOC_")}
    env.update(SIDES[kept])
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
    from benchmarks.worker import alternating, parse_jobs, write_report
    jobs = [tuple(j.split(":")) for j in parse_jobs(ap, args.jobs)]
    if args.rounds < 1 or args.seconds <= 0:
        ap.error("--rounds must be at least 1 and --seconds above 0")
    rows = []
    for workload, mode in jobs:
        runs = alternating((False, True), args.rounds,
                           lambda kept: _run(workload, mode, args.seconds, kept))
        for kept, r in runs.items():  # (each side must be what it says)
            if {x["host_memory"].startswith("freed memory kept") for x in r} != {kept}:
                raise RuntimeError(f"{workload} {mode}: host memory {r[0]['host_memory']!r}")
        med = {r: {k: statistics.median(x[k] for x in runs[r]) for k in runs[r][0] if k != "host_memory"}
               for r in runs}
        rows.append((workload, mode, med[False], med[True]))
        print(f"{workload} {mode}: {med[False]['median_ms']:.2f} -> {med[True]['median_ms']:.2f} ms", flush=True)
    from benchmarks.cpu_rounding import cpu_description
    from lazyxla.host_malloc import SETTINGS
    lines = ["# Lazy mode: glibc's malloc defaults against lazyxla's setting (freed memory kept)", "",
             f"`python -m benchmarks.host_malloc --jobs {args.jobs} --rounds {args.rounds}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}, {cpu_description()}; defaults: LAZYXLA_HOST_MALLOC=0; kept: "
             "lazyxla's mallopt at import, " + " ".join(f"{k}={v}" for k, _, v in SETTINGS)
             + f". One core for XLA, as in the suite; each side in its own process, alternating; "
             f"medians over {args.rounds} rounds of each process's median step.", "",
             "| workload | mode | defaults ms | kept ms | kept / defaults | page faults a step, defaults | "
             "kept | peak RSS MB, defaults | kept |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for workload, mode, d, s in rows:
        lines.append(f"| {workload} | {mode} | {d['median_ms']:.2f} | {s['median_ms']:.2f} | "
                     f"{s['median_ms'] / d['median_ms']:.2f} | {d['faults_per_step']:.0f} | "
                     f"{s['faults_per_step']:.0f} | {d['rss_mb']:.0f} | {s['rss_mb']:.0f} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

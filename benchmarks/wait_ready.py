"""Waiting for a program's results on the CPU backend: blocked at once (LAZYXLA_SPIN_WAIT_US=0)
against lazyxla's default, which polls for up to 300 us first, unless the last wait took longer
(lazyxla/jaxenv.py, wait_ready).
Each side runs in its own process (the setting is read once); the two alternate, round after
round, so a slow phase of the machine does not decide one side.

    python -m benchmarks.wait_ready                               # MLP and transformer, 2 rounds
    python -m benchmarks.wait_ready --jobs mlp:infer:compiled --rounds 3

A job is workload:mode:system (system: lazy, sync() + wait() per step; or compiled). Per job:
the median step, and the process's CPU time per step (what the polling costs). Writes
benchmarks/results/wait_ready.md.
"""
from __future__ import annotations

import pathlib
import statistics
import sys
import time

JOBS = ("mlp:infer:lazy,mlp:infer:compiled,mlp:train:lazy,mlp:train:compiled,"
        "transformer:infer:lazy,transformer:infer:compiled,transformer:train:compiled")
ROOT = pathlib.Path(__file__).resolve().parent.parent


def child(workload: str, mode: str, system: str, seconds: float) -> dict:
    from benchmarks.worker import steady_state
    return steady_state(workload, mode, system, seconds)


def _run(job, seconds, spin_us: str | None) -> dict:
    from benchmarks.suite import _env, run_child
    env = {k: v for k, v in _env(1).items() if k != "LAZYXLA_SPIN_WAIT_US"}
    if spin_us is not None:
        env["LAZYXLA_SPIN_WAIT_US"] = spin_us
    return run_child("benchmarks.wait_ready", ["--child", *job, str(seconds)], env, ":".join(job))


def main(argv=None) -> int:
    from benchmarks.worker import side_by_side
    parsed = side_by_side(argv, __doc__, JOBS, str(ROOT / "benchmarks" / "results" / "wait_ready.md"), child)
    if parsed is None:
        return 0
    args, jobs = parsed
    from benchmarks.worker import alternating, write_report
    rows = []
    for job in jobs:
        runs = alternating(("0", None), args.rounds, lambda spin: _run(job, args.seconds, spin))
        med = {s: {k: statistics.median(x[k] for x in runs[s]) for k in ("median_ms", "cpu_ms")}
               for s in runs}
        rows.append((job, med["0"], med[None]))
        print(f"{':'.join(job)}: {med['0']['median_ms']:.3f} -> {med[None]['median_ms']:.3f} ms", flush=True)
    lines = ["# Waiting on the CPU backend: blocking at once against polling first", "",
             f"`python -m benchmarks.wait_ready --jobs {args.jobs} --rounds {args.rounds}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}. One core for XLA, as in the suite; each side in "
             f"its own process, alternating; medians over {args.rounds} rounds of each process's "
             "median step. Block: LAZYXLA_SPIN_WAIT_US=0; poll: lazyxla's default (300 us, skipped "
             "while the last wait took longer). CPU: "
             "the process's CPU time per step, all threads (XLA's included).", "",
             "| workload | mode | system | block ms | poll ms | ratio | CPU ms a step, block | poll |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for (workload, mode, system), b, p in rows:
        lines.append(f"| {workload} | {mode} | {system} | {b['median_ms']:.3f} | {p['median_ms']:.3f} | "
                     f"{p['median_ms'] / b['median_ms']:.2f} | {b['cpu_ms']:.3f} | {p['cpu_ms']:.3f} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

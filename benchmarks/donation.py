"""Training steps with lazyxla's donation (lazyxla/runtime/donation.py: a program writes an in-place
update into the memory of the data it replaces) against none (LAZYXLA_DONATE=0), in lazy mode
(LAZYXLA_DONATE_SYNCS=1: off by default on the CPU backend) and under torch.compile. Each side runs in its own process; the two alternate, round after round.

    python -m benchmarks.donation                                  # 4 workloads x 2 systems, 2 rounds
    python -m benchmarks.donation --jobs gpt:train:lazy --rounds 3

Per job: the median step, and the peak RSS of the steady steps alone (the high-water mark reset
after warm-up): without donation the updated state is held twice while a step runs. Writes
benchmarks/results/donation.md.
"""
from __future__ import annotations

import pathlib
import statistics
import sys
import time

JOBS = ("mlp:train:lazy,mlp:train:compiled,transformer:train:lazy,transformer:train:compiled,"
        "cnn:train:lazy,cnn:train:compiled,gpt:train:lazy,gpt:train:compiled")
ROOT = pathlib.Path(__file__).resolve().parent.parent
KEYS = ("median_ms", "steady_rss_mb", "rss_mb", "donated_per_step", "copies_per_step")


def child(workload: str, mode: str, system: str, seconds: float) -> dict:
    from benchmarks.worker import steady_state
    from lazyxla import metrics
    return steady_state(workload, mode, system, seconds, lambda: {
        "donated_per_step": metrics.counter_value("DonatedInput") or 0,
        "copies_per_step": metrics.counter_value("DonationCopy") or 0})


def _run(job, seconds, donate: bool) -> dict:
    from benchmarks.suite import _env, run_child
    env = dict(_env(1), LAZYXLA_DONATE="1" if donate else "0",  # (lazy mode's syncs too: their
               LAZYXLA_DONATE_SYNCS="1" if donate else "0")        # default is off on the CPU)
    return run_child("benchmarks.donation", ["--child", *job, str(seconds)], env, ":".join(job))


def main(argv=None) -> int:
    from benchmarks.worker import side_by_side
    parsed = side_by_side(argv, __doc__, JOBS, str(ROOT / "benchmarks" / "results" / "donation.md"), child)
    if parsed is None:
        return 0
    args, jobs = parsed
    from benchmarks.worker import alternating, write_report
    rows = []
    for job in jobs:
        runs = alternating((False, True), args.rounds, lambda donate: _run(job, args.seconds, donate))
        med = {d: {k: statistics.median(x[k] for x in runs[d] if x[k] is not None)
                   if any(x[k] is not None for x in runs[d]) else None for k in KEYS} for d in runs}
        if med[False]["donated_per_step"] or not med[True]["donated_per_step"]:
            raise RuntimeError(f"{':'.join(job)}: donation was not what the side says: {med}")
        rows.append((job, med[False], med[True]))
        print(f"{':'.join(job)}: {med[False]['median_ms']:.2f} -> {med[True]['median_ms']:.2f} ms, "
              f"steady peak RSS {med[False]['steady_rss_mb']} -> {med[True]['steady_rss_mb']} MB", flush=True)
    from benchmarks.cpu_rounding import cpu_description
    mb = lambda v: "—" if v is None else f"{v:.0f}"  # noqa: E731
    lines = ["# Training steps: donated inputs against none", "",
             f"`python -m benchmarks.donation --jobs {args.jobs} --rounds {args.rounds}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}, {cpu_description()}. None: LAZYXLA_DONATE=0; "
             "donated: LAZYXLA_DONATE=1 and LAZYXLA_DONATE_SYNCS=1 (lazyxla's default for compiled graphs; lazy mode's syncs donate by default off the CPU backend only). One core for XLA, as in the suite; each side in its own "
             f"process, alternating; medians over {args.rounds} rounds of each process's median "
             "step. Steady peak RSS: the process's peak resident memory during the timed steps "
             "alone (its high-water mark reset after warm-up); peak RSS: the whole process's, "
             "first step included. Donated and copied: inputs per step (a copy is fed where "
             "something else still holds the data).", "",
             "| workload | mode | system | none ms | donated ms | ratio | steady peak RSS MB, none | "
             "donated | peak RSS MB, none | donated | donated a step | copied a step |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (workload, mode, system), n, d in rows:
        lines.append(f"| {workload} | {mode} | {system} | {n['median_ms']:.2f} | {d['median_ms']:.2f} | "
                     f"{d['median_ms'] / n['median_ms']:.2f} | {mb(n['steady_rss_mb'])} | "
                     f"{mb(d['steady_rss_mb'])} | {mb(n['rss_mb'])} | {mb(d['rss_mb'])} | "
                     f"{d['donated_per_step']:.1f} | {d['copies_per_step']:.2f} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A loop that reads a new position of a device tensor every step (`x[i]`), against the same loop
reading one position over and over: time per step, host memory and what lazyxla keeps.

    python -m benchmarks.index_loops                    # 4000 steps per process, 2 rounds
    python -m benchmarks.index_loops --steps 8000 --rounds 3

Each step reads row i of a 20000 x 64 tensor on the device, scaled, and adds a 3-row slice
starting at i (`x[i] * 0.5 + x[i:i + 3].sum(0)`): in lazy mode, synced every 50 steps; compiled
(`torch.compile(backend="lazyxla")`, the step a function of (x, i)), synced every step. A new
index is a new shape signature in lazy mode; in the compiled function the bridge feeds it as the
views' starts (lazyxla/dynamo/fed_starts.py; LAZYXLA_FEED_ITEM_INPUTS=0 keys the programs by it,
the case "keyed"); the XLA program is shared either way (the start is a runtime parameter), and
the compiled function checks each call's views against the traced ones. One more case passes the
index as a 1-element tensor on the device (`x[idx][0]`, `index_select`; its transfer is part of
the step), which the compiled function takes as an input like any tensor. Each case runs in its own
process (XLA on one core, as in the suite), the cases alternating; reported per case: the median
step over the last half, the growth of the process's resident memory over the last half (per 1000
steps), the signatures kept by shape inference, the programs kept by the compiled graph, its
re-extractions and XLA compiles; medians over the rounds.
Writes benchmarks/results/index_loops.md.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = ("lazy, a new index every step", "lazy, one index", "compiled, a new index every call",
         "compiled, a new index every call, keyed by value", "compiled, one index",
         "compiled, a new index every call, as a 1-element tensor")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS")) / 1024


def _run_case(case: str, steps: int) -> dict:
    if case.endswith("keyed by value"):  # (read when the bridge is made)
        os.environ["LAZYXLA_FEED_ITEM_INPUTS"] = "0"
    import torch
    import lazyxla
    from lazyxla import metrics
    from lazyxla.dynamo import bridge
    from lazyxla.ir import meta
    from benchmarks.worker import start_xla_runtime
    start_xla_runtime("lazy", 1)
    torch.set_num_threads(1)
    dev = lazyxla.device()
    x = torch.randn(20000, 64).to(dev)
    acc = torch.zeros(64).to(dev)
    lazyxla.sync()
    compiled = case.startswith("compiled")
    bridges = []
    if compiled:
        init = bridge.Bridge.__init__

        def keep(self, *args, **kwargs):  # (to count the programs the graph keeps)
            init(self, *args, **kwargs)
            bridges.append(self)
        bridge.Bridge.__init__ = keep

    def step(x, i, acc):
        return acc + x[i] * 0.5 + x[i:i + 3].sum(0)

    def step_of_a_tensor_index(x, idx, acc):  # (the same step, idx = tensor([i]) on the device)
        return acc + x[idx][0] * 0.5 + x.index_select(0, idx + three).sum(0)
    three = torch.arange(3).to(dev)
    tensor_index = case.endswith("tensor")
    fn = step_of_a_tensor_index if tensor_index else step
    run = torch.compile(fn, backend="lazyxla") if compiled else fn
    new_index = "new index" in case
    times, rss_half = [], None
    for n in range(steps):
        i = 2 + n if new_index else 7
        t0 = time.perf_counter()
        acc = run(x, torch.tensor([i]).to(dev) if tensor_index else i, acc)
        if compiled or n % 50 == 49:
            lazyxla.sync()
        times.append(time.perf_counter() - t0)
        if n == steps // 2:
            rss_half = _rss_mb()
    lazyxla.sync()
    lazyxla.wait()
    half = steps - steps // 2
    return {"median_us": statistics.median(times[steps // 2:]) * 1e6,
            "rss_mb_per_1000": (_rss_mb() - rss_half) / half * 1000,
            "signatures": len(meta._CACHE) + len(meta._CACHE.old),
            "programs": max((len(b.programs) + len(b.programs.old) for b in bridges), default=0),
            "retraces": metrics.counter_value("DynamoRetrace") or 0,
            "compiles": metrics.counter_value("UncachedCompile") or 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "index_loops.md"))
    ap.add_argument("--case", help=argparse.SUPPRESS)  # (a worker process)
    args = ap.parse_args(argv)
    if args.steps < 100 or args.steps > 19000 or args.rounds < 1:
        ap.error("--steps must be 100 to 19000 (rows of the tensor read) and --rounds at least 1")
    if args.case:
        print("RESULT " + json.dumps(_run_case(args.case, args.steps)), flush=True)
        return 0
    from benchmarks.suite import run_child
    from benchmarks.worker import alternating, write_report
    env = dict(os.environ, OMP_NUM_THREADS="1",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    results = alternating(CASES, args.rounds, lambda case: run_child(
        "benchmarks.index_loops", ["--case", case, "--steps", str(args.steps)], env,
        f"index_loops: case {case!r}"))
    lines = ["# A loop reading a new position every step, against one position", "",
             f"`python -m benchmarks.index_loops --steps {args.steps} --rounds {args.rounds}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}. Step: `acc + x[i] * 0.5 + x[i:i + 3].sum(0)` "
             "on a 20000 x 64 device tensor; lazy mode syncs every 50 steps, the compiled function "
             "every call (the case keyed by value with LAZYXLA_FEED_ITEM_INPUTS=0, which keys "
             "the compiled programs by i instead of feeding it as the views' start); the last case "
             "passes i as `idx = torch.tensor([i])` on the device "
             "(`acc + x[idx][0] * 0.5 + x.index_select(0, idx + arange(3)).sum(0)`, the transfer "
             "timed). Each case in its own process (XLA on one core), the cases alternating; per "
             "case the median over the rounds of: the median step over the last half of the "
             "steps, the resident memory added over that half per 1000 steps, and at the end the "
             "signatures shape inference keeps (two generations of 32768 at most), the programs "
             "the compiled graph keeps (two generations of 1024 at most), its re-extractions and "
             "XLA compiles.",
             "", "| case | step us | RSS MB per 1000 steps | signatures kept | programs kept | "
             "re-extractions | XLA compiles |", "|---|---:|---:|---:|---:|---:|---:|"]
    for case in CASES:
        med = {k: statistics.median(r[k] for r in results[case]) for k in results[case][0]}
        lines.append(f"| {case} | {med['median_us']:.0f} | {med['rss_mb_per_1000']:.2f} | "
                     f"{med['signatures']:.0f} | {med['programs']:.0f} | {med['retraces']:.0f} | "
                     f"{med['compiles']:.0f} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Lazy-mode training on sequences of varying length, with shape variants compiled quick first
(lazyxla's default, runtime/tiering.py) against every program compiled optimized
(LAZYXLA_QUICK_COMPILE=0), each side in its own process, the two alternating round after round.

    python -m benchmarks.variable_lengths                       # 3 mixes, 2 rounds
    python -m benchmarks.variable_lengths --mixes 24x200 --rounds 3

A mix LxS trains 2 transformer blocks (d_model 64, 4 heads, batch 4, AdamW) for S steps on
lengths drawn from L distinct ones (16, 17, ...; the same draws on both sides), syncing every
step: every new length is a new program. Measured: the whole run's time (compiles included) and
its first step; the final losses of the two sides are compared. Writes
benchmarks/results/variable_lengths.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import sys
import time

MIXES = "64x100,24x200,4x300"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def child(lengths: int, steps: int) -> dict:
    """One process: the whole training run."""
    import torch
    from benchmarks import worker
    worker.start_xla_runtime("lazy", 1)
    import lazyxla
    from lazyxla import metrics
    from benchmarks.workloads import Block
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dev = lazyxla.device()
    model = torch.nn.Sequential(Block(64, 4), Block(64, 4)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = random.Random(0)
    draws = [rng.randrange(16, 16 + lengths) for _ in range(steps)]
    xs = [torch.randn(4, n, 64) for n in draws]
    t0 = time.perf_counter()
    first = None
    for x in xs:
        loss = model(x.to(dev)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        lazyxla.sync()
        if first is None:
            lazyxla.wait()
            first = time.perf_counter() - t0
    lazyxla.wait()
    total = time.perf_counter() - t0
    count = lambda name: metrics.counter_value(name) or 0  # noqa: E731
    return {"total_s": total, "first_s": first, "distinct": len(set(draws)), "loss": loss.item(),
            "compiles": count("UncachedCompile"), "quick": count("QuickCompile"),
            "upgrades": count("UpgradeCompile")}


def _run(lengths: int, steps: int, quick: bool) -> dict:
    from benchmarks.suite import _env, run_child
    env = {**_env(1), "LAZYXLA_QUICK_COMPILE": "1" if quick else "0"}
    return run_child("benchmarks.variable_lengths", ["--child", str(lengths), str(steps)], env,
                     f"{lengths}x{steps}")


def _mixes(ap, text: str) -> list[tuple[int, int]]:
    mixes = []
    for item in text.split(","):
        try:
            lengths, steps = (int(v) for v in item.split("x"))
        except ValueError:
            ap.error(f"--mixes: {item!r} is not LENGTHSxSTEPS (e.g. 24x200)")
        if lengths < 1 or steps < 1:
            ap.error(f"--mixes: {item!r} needs at least one length and one step")
        mixes.append((lengths, steps))
    return mixes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mixes", default=MIXES, help=f"comma list of LENGTHSxSTEPS (default {MIXES})")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "variable_lengths.md"))
    ap.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0
    mixes = _mixes(ap, args.mixes)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    from benchmarks.worker import write_report
    rows = []
    for lengths, steps in mixes:
        runs = {True: [], False: []}
        for _ in range(args.rounds):
            for quick in (True, False):
                runs[quick].append(_run(lengths, steps, quick))
        med = {q: {k: statistics.median(r[k] for r in runs[q]) for k in ("total_s", "first_s")} for q in runs}
        rows.append((lengths, steps, med, runs))
        print(f"{lengths}x{steps}: quick first {med[True]['total_s']:.1f} s, "
              f"all optimized {med[False]['total_s']:.1f} s", flush=True)
    lines = ["# Varying lengths in lazy mode: shape variants compiled quick first, or all optimized", "",
             f"`python -m benchmarks.variable_lengths --mixes {args.mixes} --rounds {args.rounds}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}. 2 transformer blocks (d 64), batch 4, AdamW, a "
             "sync per step, lengths drawn from the mix's distinct ones; one core for XLA, as in the "
             "suite; each side in its own process (`LAZYXLA_QUICK_COMPILE=1` / `0`), alternating; "
             f"medians over {args.rounds} rounds.", "",
             "| lengths x steps | lengths seen | run s, quick first | all optimized | ratio | first step s, "
             "quick first | all optimized | compiles (quick, upgraded) | final losses |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for lengths, steps, med, runs in rows:
        q, o = runs[True][0], runs[False][0]
        same = "equal" if all(r["loss"] == o["loss"] for r in runs[True] + runs[False]) else \
            f"{q['loss']:.6g} / {o['loss']:.6g}"
        lines.append(f"| {lengths} x {steps} | {q['distinct']} | {med[True]['total_s']:.1f} | "
                     f"{med[False]['total_s']:.1f} | {med[True]['total_s'] / med[False]['total_s']:.2f} | "
                     f"{med[True]['first_s']:.2f} | {med[False]['first_s']:.2f} | "
                     f"{q['compiles']} ({q['quick']}, {q['upgrades']}) | {same} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

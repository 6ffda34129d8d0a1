"""A compiled optimizer step under learning-rate schedulers, against the same step at a constant
learning rate.

    python -m benchmarks.scheduler_step                 # every case, 40 steps each
    python -m benchmarks.scheduler_step --steps 60 --rounds 3

`torch.compile(opt.step, backend="lazyxla")` on a 6-layer MLP (256 wide, 12 parameters); each
step is preceded by a lazy-mode forward and backward (synced and waited, not timed). A scheduler
changes the learning rate (OneCycleLR also the momentum) every step; Dynamo passes those floats
as 0-dim CPU tensors read with `.item()`, which the bridge feeds to the program
(lazyxla/dynamo/input_items.py); with LAZYXLA_FEED_ITEM_INPUTS=0 it keys the graph by their
values instead, re-extracting it for each new one. Each case runs fed and keyed, each in its own
process (XLA on one core, as in the suite); reported: the median step after the first 10, and
the re-extractions (DynamoRetrace) over all steps, medians over --rounds processes, the runs
alternating. One more case has an int change on every call: a compiled denoiser (6 layers, 256
wide, batch 16) called with a Python int timestep (`t * freqs`, a sinusoidal embedding), as a
diffusion sampler calls it; Dynamo passes the int as a SymInt, which the bridge feeds alike.
Writes benchmarks/results/scheduler_step.md.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = {
    "Adam, constant lr": ("Adam", {}, None),
    "Adam + CosineAnnealingLR": ("Adam", {}, ("CosineAnnealingLR", {"T_max": 100})),
    "AdamW + LinearLR": ("AdamW", {}, ("LinearLR", {"start_factor": 0.1, "total_iters": 100})),
    "AdamW + OneCycleLR (lr and momentum)": ("AdamW", {}, ("OneCycleLR", {"max_lr": 0.05, "total_steps": 200})),
    "SGD momentum + CosineAnnealingLR": ("SGD", {"momentum": 0.9}, ("CosineAnnealingLR", {"T_max": 100})),
    "Adam(foreach=False) + CosineAnnealingLR": ("Adam", {"foreach": False}, ("CosineAnnealingLR", {"T_max": 100})),
    "Denoiser, an int timestep per call (inference)": None,
}
_DENOISER = "Denoiser, an int timestep per call (inference)"


def _run_denoiser(steps: int) -> dict:
    import math
    import torch
    import lazyxla
    from lazyxla import metrics
    torch.set_num_threads(1)
    dev = lazyxla.device()
    torch.manual_seed(0)

    class Denoiser(torch.nn.Module):
        def __init__(self, d=256):
            super().__init__()
            self.time = torch.nn.Linear(64, d)
            self.layers = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(6))

        def forward(self, x, t):
            freqs = torch.exp(torch.arange(32, device=x.device) * (-math.log(10000.0) / 32))
            h = x + self.time(torch.cat([(t * freqs).sin(), (t * freqs).cos()]))
            for layer in self.layers:
                h = torch.nn.functional.silu(layer(h))
            return h

    model = torch.compile(Denoiser().to(dev).eval(), backend="lazyxla")
    x = torch.randn(16, 256).to(dev)
    times = []
    with torch.no_grad():
        for t in range(steps, 0, -1):
            t0 = time.perf_counter()
            x = x - 0.01 * model(x, t)
            lazyxla.sync()
            lazyxla.wait()
            times.append(time.perf_counter() - t0)
    return {"median_ms": statistics.median(times[10:]) * 1e3,
            "retraces": metrics.counter_value("DynamoRetrace") or 0}


def _run_case(name: str, steps: int) -> dict:
    if name == _DENOISER:
        return _run_denoiser(steps)
    import torch
    import lazyxla
    from lazyxla import metrics
    torch.set_num_threads(1)
    opt_name, opt_kw, sched = CASES[name]
    dev = lazyxla.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)]).to(dev)
    x = torch.randn(32, 256).to(dev)
    opt = getattr(torch.optim, opt_name)(model.parameters(), lr=0.01, **opt_kw)
    scheduler = getattr(torch.optim.lr_scheduler, sched[0])(opt, **sched[1]) if sched else None
    step = torch.compile(opt.step, backend="lazyxla")
    times = []
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        lazyxla.sync()
        lazyxla.wait()
        t0 = time.perf_counter()
        step()
        lazyxla.sync()
        lazyxla.wait()
        times.append(time.perf_counter() - t0)
        if scheduler is not None:
            scheduler.step()
    return {"median_ms": statistics.median(times[10:]) * 1e3,
            "retraces": metrics.counter_value("DynamoRetrace") or 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--case", help=argparse.SUPPRESS)  # (a worker process)
    args = ap.parse_args(argv)
    if args.steps < 12 or args.rounds < 1:
        ap.error("--steps must be at least 12 (the first 10 are warm-up) and --rounds at least 1")
    if args.case:
        print("RESULT " + json.dumps(_run_case(args.case, args.steps)))
        return 0
    env = dict(os.environ, OMP_NUM_THREADS="1",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    results: dict = {(name, fed): [] for name in CASES for fed in (True, False)}
    for _ in range(args.rounds):
        for name, fed in results:
            out = subprocess.run([sys.executable, "-m", "benchmarks.scheduler_step", "--case", name,
                                  "--steps", str(args.steps)], cwd=ROOT,
                                 env=dict(env, LAZYXLA_FEED_ITEM_INPUTS="1" if fed else "0"),
                                 capture_output=True, text=True)
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(out.stdout[-2000:] + out.stderr[-4000:], file=sys.stderr)
                raise SystemExit(f"scheduler_step: case {name!r} failed")
            results[name, fed].append(json.loads(line[7:]))
    base = statistics.median(r["median_ms"] for r in results["Adam, constant lr", True])
    lines = ["# A compiled optimizer step under learning-rate schedulers", "",
             f"`python -m benchmarks.scheduler_step --steps {args.steps} --rounds {args.rounds}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}. `torch.compile(opt.step, backend=\"lazyxla\")`, "
             "6-layer MLP (256 wide, 12 parameters), XLA on one core; each case in its own process, "
             "the cases alternating; median step after the first 10 (forward and backward not timed), "
             "medians over the rounds.", "",
             "fed: lazyxla's default; keyed: `LAZYXLA_FEED_ITEM_INPUTS=0`, each new value re-extracts "
             "the graph (lazyxla's behaviour before the feeding). The denoiser's step is its "
             "forward (no optimizer, so no constant-lr baseline).", "",
             "| case | fed: step ms | vs constant lr | re-extractions | keyed: step ms | re-extractions | keyed / fed |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in CASES:
        ms = {fed: statistics.median(r["median_ms"] for r in results[name, fed]) for fed in (True, False)}
        rt = {fed: max(r["retraces"] for r in results[name, fed]) for fed in (True, False)}
        ratio = "—" if name == _DENOISER else f"{ms[True] / base:.2f}"
        lines.append(f"| {name} | {ms[True]:.2f} | {ratio} | {rt[True]} | "
                     f"{ms[False]:.2f} | {rt[False]} | {ms[False] / ms[True]:.2f} |")
    text = "\n".join(lines) + "\n"
    out_path = ROOT / "benchmarks" / "results" / "scheduler_step.md"
    out_path.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

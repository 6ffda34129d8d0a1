"""The training step with each of torch.optim's AdamW implementations: the for-loop one
(`foreach=False`, eager's default on the CPU), the foreach one (torch.optim's default on lazyxla)
and the fused one (`fused=True`), in eager, lazy mode and under torch.compile.

    python -m benchmarks.optimizer_paths                    # every side, 2 rounds
    python -m benchmarks.optimizer_paths --systems lazy --rounds 3

The job: the suite's MLP (3x256, batch 32, cross-entropy) trained for --steps steps from the same
weights. lazy: sync() and wait() per step; compiled: torch.compile of the forward and loss, and of
`opt.step`, waiting per step; dynamo-eager: the same on the CPU with PyTorch's own
backend="eager" (Dynamo's traced step run by eager PyTorch: the reference for the compiled
sides' weights, as Dynamo's trace of AdamW differs from the uncompiled step). Per side: the median step after the first 10, the median time of
`opt.step()` alone (lazy mode: recording it; compiled: the compiled call; eager: computing it),
XLA compiles, and the final loss and largest weight difference from eager's for-loop AdamW (each
side in its own process; XLA on one core, as in the suite; the sides alternate, round after
round). Writes benchmarks/results/optimizer_paths.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATHS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
SYSTEMS = ("eager", "lazy", "compiled", "dynamo-eager")
WARM = 10


def child(system: str, path: str, steps: int) -> dict:
    import torch
    from benchmarks import worker
    from benchmarks.workloads import make
    worker.start_xla_runtime(system, 1)  # (eager: none)
    torch.set_num_threads(1)
    model, x, y, loss_fn = make("mlp")
    lazyxla = None
    if system in ("lazy", "compiled"):
        import lazyxla
        dev = lazyxla.device()
        model, x, y = model.to(dev), x.to(dev), y.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **PATHS[path])

    def fwd_loss():
        return loss_fn(model(x), y)
    ostep = opt.step
    if system in ("compiled", "dynamo-eager"):
        backend = "lazyxla" if system == "compiled" else "eager"
        fwd_loss = torch.compile(fwd_loss, backend=backend)
        ostep = torch.compile(opt.step, backend=backend)
    step_s, opt_s, loss = [], [], None
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = fwd_loss()
        loss.backward()
        t1 = time.perf_counter()
        ostep()
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if lazyxla is not None:
            lazyxla.sync()
            lazyxla.wait()
        step_s.append(time.perf_counter() - t0)
        opt_s.append(t2 - t1)
    weights = [p.detach().cpu().flatten().tolist() for p in model.parameters()]
    count = (lambda name: lazyxla.metrics.counter_value(name) or 0) if lazyxla else (lambda name: 0)
    return {"step_ms": statistics.median(step_s[WARM:]) * 1e3,
            "opt_ms": statistics.median(opt_s[WARM:]) * 1e3,
            "compiles": count("UncachedCompile"), "loss": float(loss.item()), "weights": weights}


def _run(system: str, path: str, steps: int) -> dict:
    from benchmarks.suite import _env, run_child
    return run_child("benchmarks.optimizer_paths", ["--child", f"{system}:{path}:{steps}"],
                     _env(1), f"{system} {path}")


def _max_diff(a, b) -> float:
    return max(abs(u - v) for pa, pb in zip(a, b) for u, v in zip(pa, pb))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma list of " + ", ".join(SYSTEMS))
    ap.add_argument("--paths", default=",".join(PATHS), help="comma list of " + ", ".join(PATHS))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "optimizer_paths.md"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        system, path, steps = args.child.split(":")
        print("RESULT " + json.dumps(child(system, path, int(steps))), flush=True)
        return 0
    systems, paths = args.systems.split(","), args.paths.split(",")
    if any(s not in SYSTEMS for s in systems):
        ap.error(f"--systems: a comma list of {', '.join(SYSTEMS)}, got {args.systems!r}")
    if any(p not in PATHS for p in paths):
        ap.error(f"--paths: a comma list of {', '.join(PATHS)}, got {args.paths!r}")
    if args.steps <= WARM:
        ap.error(f"--steps must be more than {WARM} (the steps not timed)")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    from benchmarks.worker import write_report
    sides = [("eager", "for-loop")] + [(s, p) for s in systems for p in paths
                                      if (s, p) != ("eager", "for-loop")]
    runs = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side in sides:
            runs[side].append(_run(*side, args.steps))
    reference = runs[("eager", "for-loop")][0]
    base = statistics.median(r["step_ms"] for r in runs[("eager", "for-loop")])
    lines = ["# AdamW's for-loop, foreach and fused implementations: eager, lazy mode, compiled", "",
             f"`python -m benchmarks.optimizer_paths --systems {args.systems} --paths {args.paths} "
             f"--steps {args.steps} --rounds {args.rounds}` on {time.strftime('%Y-%m-%d %H:%M')}. "
             f"The suite's MLP (3x256, batch 32), {args.steps} training steps from the same weights; "
             "one core for XLA, as in the suite; each side in its own process, alternating; medians "
             f"over {args.rounds} rounds of each process's median step (steps after the first "
             f"{WARM}). opt.step: its own time (eager: computing it; lazy mode: recording it; "
             "compiled: the compiled call, which dispatches the program). Step: forward, backward, "
             "opt.step, zero_grad, and for lazyxla sync() and wait(). Weights: the largest "
             "difference from eager's for-loop AdamW after the last step. for-loop is eager's "
             "default on the CPU (`foreach=False`), foreach torch.optim's default on lazyxla. dynamo-eager: "
             "torch.compile with PyTorch's own backend=\"eager\" on the CPU, the reference for the "
             "compiled rows' weights (Dynamo's trace of AdamW differs from the uncompiled step).", "",
             "| system | AdamW | step ms | vs eager for-loop | opt.step ms | XLA compiles | "
             "final loss | weights vs eager for-loop |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (system, path), rs in runs.items():
        step = statistics.median(r["step_ms"] for r in rs)
        diff = max(_max_diff(r["weights"], reference["weights"]) for r in rs)
        lines.append(f"| {system} | {path} | {step:.3f} | {step / base:.2f}x | "
                     f"{statistics.median(r['opt_ms'] for r in rs):.3f} | "
                     + (f"{statistics.median(r['compiles'] for r in rs):.0f} | " if system in ("lazy", "compiled") else "— | ")
                     + ", ".join(sorted({f"{r['loss']:.6f}" for r in rs})) + f" | {diff:.1e} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

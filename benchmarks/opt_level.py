"""XLA's CPU compile options: the programs of a step compiled at optimization level 3 (XLA's
default), at level 2 (lazyxla's, runtime/compiler.py) and with the quick options shape variants
are first compiled with (runtime/tiering.py), compile time and steady-state runs side by side.

    python -m benchmarks.opt_level                      # the suite's 8 workloads and `dyn`
    python -m benchmarks.opt_level --jobs cnn:train,dyn --seconds 20

Per job, in one process (XLA on one core, as in the suite): lazy mode runs the step twice; the
programs of the second step are compiled twice with each option set, the sets alternating (timed:
XLA's compile alone, the faster of the two), then run on the inputs lazy mode fed them, the sets
alternating in rounds of 3 until --seconds have passed and each has run 30 steps (median).
`dyn` is the dynamic-length workload: one transformer block at --lengths sequence lengths, a
program each. Outputs are compared with level 2's: bitwise equal, or the largest difference. Writes
benchmarks/results/opt_level.md.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

JOBS = "mlp:infer,mlp:train,transformer:infer,transformer:train,cnn:infer,cnn:train,gpt:infer,gpt:train,dyn"

def _variants() -> dict:
    """option set name -> XLA compile options"""
    from lazyxla.runtime.tiering import QUICK_OPTIONS
    return {"3": {"xla_backend_optimization_level": 3}, "2": {"xla_backend_optimization_level": 2},
            "quick": QUICK_OPTIONS}
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _captured_programs(job: str, lengths: int) -> list:
    """(GraphSpec, inputs in parameter order) of every program one steady step runs."""
    from lazyxla.runtime import executor
    if job == "dyn":
        import torch
        import lazyxla
        from benchmarks.workloads import make
        model = make("dyn")[0].eval().to(lazyxla.device())
        xs = [torch.randn(1, n, 64).to(lazyxla.device()) for n in range(16, 16 + lengths)]

        def step():
            with torch.no_grad():
                for x in xs:
                    y = model(x)  # (kept while syncing: an unread result computes nothing)
                    lazyxla.sync()
            lazyxla.wait()
            return y
    else:
        from benchmarks.worker import Runner
        workload, mode = job.split(":")
        runner = Runner({"system": "lazy", "workload": workload, "mode": mode, "threads": 1})
        runner.setup()

        def step():
            runner.block(runner.step())
    return captured_programs(step)


def captured_programs(step) -> list:
    """(GraphSpec, inputs in parameter order) of every program a steady call of `step` runs."""
    from lazyxla.runtime import executor
    step()  # the first step's own programs (an optimizer's state made) are not the steady ones
    captured, execute = [], executor.execute

    def capture(program, inputs):  # (the inputs the run takes as donated are kept as copies)
        captured.append(kept_inputs(program, inputs))
        return execute(program, inputs)
    specs = []
    executable_for = executor.executable_for

    def spec_of(spec):
        specs.append(spec)
        return executable_for(spec)
    executor.execute, executor.executable_for = capture, spec_of
    try:
        step()
    finally:
        executor.execute, executor.executable_for = execute, executable_for
    return list(zip(specs, captured))


def kept_inputs(program, inputs) -> list:
    """A program's inputs, with copies of the arrays its run consumes (Program.donated), to run
    it again on them."""
    import jax
    from lazyxla.jaxenv import x64
    kept = list(inputs)
    with x64(True):
        for i in program.donated:
            kept[i] = jax.device_put(kept[i], may_alias=False)
    return kept


def measure(job: str, seconds: float, lengths: int, min_steps: int = 30) -> dict:
    import jax
    import numpy as np
    from lazyxla.jaxenv import x64
    from lazyxla.runtime import compiler
    programs = _captured_programs(job, lengths)
    if not programs:
        raise RuntimeError(f"{job}: the step ran no program")
    variants = _variants()
    levels = tuple(variants)
    compiled = {lv: [] for lv in levels}
    compile_s = dict.fromkeys(levels, 0.0)
    with x64(True):
        for spec, inputs in programs:
            args = executable_arguments(spec, inputs)
            best = {}
            for lv in levels + levels[::-1]:  # twice each, in both orders: the faster counts
                # lowered afresh: JAX keeps what it compiled per lowered module and options
                lowered = jax.jit(compiler.build_function(spec, None)).lower(*compiler.param_avals(spec))
                t0 = time.perf_counter()
                exe = lowered.compile(compiler_options=variants[lv])
                seconds = time.perf_counter() - t0
                if lv not in best or seconds < best[lv][0]:
                    best[lv] = (seconds, exe)
            for lv in levels:
                compile_s[lv] += best[lv][0]
                compiled[lv].append((best[lv][1], args))

    def run(lv):
        with x64(True):
            return jax.block_until_ready([exe(*args) for exe, args in compiled[lv]])
    outs = {lv: [[np.asarray(o) for o in program] for program in run(lv)] for lv in levels}
    same = {}
    for lv in ("3", "quick"):
        same[lv] = how_far([(a, b) for pa, pb in zip(outs["2"], outs[lv]) for a, b in zip(pa, pb)])
    run_ms = alternating_medians_ms(run, levels, seconds, min_steps)
    return {"programs": len(programs), "same_3": same["3"], "same_quick": same["quick"],
            **{f"compile_s_{lv}": compile_s[lv] for lv in levels},
            **{f"run_ms_{lv}": run_ms[lv] for lv in levels}}


def executable_arguments(spec, inputs) -> list:
    """A captured program's inputs as its executable takes them, already device arrays."""
    import jax
    import numpy as np
    from lazyxla.runtime import compiler
    feed = compiler._feeder(spec)
    return [jax.device_put(a) if isinstance(a, np.ndarray) else a
            for a in (feed(inputs) if feed else inputs)]


def how_far(pairs) -> str:
    """'bitwise equal', or how far apart the float arrays of (a, b) pairs are at most."""
    import numpy as np
    if all(np.array_equal(a, b, equal_nan=True) for a, b in pairs):
        return "bitwise equal"
    diff = max((float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                for a, b in pairs if a.size and a.dtype.kind == "f"), default=0.0)
    return f"differ by up to {diff:.1e}"


def alternating_medians_ms(run, variants, seconds: float, min_runs: int) -> dict:
    """{variant: median ms of run(variant)}, the variants timed in alternating rounds of 3 runs
    for `seconds` and at least `min_runs` each, so that a slow phase of the machine hits all."""
    times = {v: [] for v in variants}
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(times[variants[-1]]) < min_runs:
        for v in variants:
            for _ in range(3):
                t0 = time.perf_counter()
                run(v)
                times[v].append(time.perf_counter() - t0)
    return {v: statistics.median(times[v]) * 1e3 for v in variants}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default=JOBS, help=f"comma list of workload:mode or dyn (default {JOBS})")
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds per job")
    ap.add_argument("--lengths", type=int, default=10, help="sequence lengths of the dyn job")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "opt_level.md"))
    args = ap.parse_args(argv)
    from benchmarks.worker import parse_jobs, start_xla_runtime, write_report
    jobs = parse_jobs(ap, args.jobs, names=("dyn",))
    if args.seconds <= 0 or args.lengths < 1:
        ap.error("--seconds must be above 0 and --lengths at least 1")
    start_xla_runtime("lazy", 1)
    rows = []
    for job in jobs:
        r = measure(job, args.seconds, args.lengths)
        rows.append((job, r))
        print(f"{job}: compile {r['compile_s_3']:.2f} / {r['compile_s_2']:.2f} / "
              f"{r['compile_s_quick']:.2f} s, run {r['run_ms_3']:.3f} / {r['run_ms_2']:.3f} / "
              f"{r['run_ms_quick']:.3f} ms (level 3 / level 2 / quick)", flush=True)
    lines = ["# XLA CPU compile options: level 3 (XLA's default), level 2 (lazyxla's), quick "
             "(shape variants' first compile)", "",
             f"`python -m benchmarks.opt_level --jobs {args.jobs} --seconds {args.seconds:g} "
             f"--lengths {args.lengths}` on {time.strftime('%Y-%m-%d %H:%M')}. One process, XLA "
             "on one core; each program compiled twice with each option set (compile: "
             "XLA alone, the faster of the two, summed over the step's programs); runs alternate "
             "between the option sets, at least 30 steps each (median step). quick = "
             "`tiering.QUICK_OPTIONS` (LLVM -O0, XLA's classic element emitters, one LLVM module). "
             f"dyn: one transformer block (d 64) at {args.lengths} sequence lengths, a program each.", "",
             "| job | programs | compile s, level 3 | level 2 | quick | quick / level 2 | "
             "run ms, level 3 | level 2 | quick | quick / level 2 | level 3's outputs | quick's outputs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for job, r in rows:
        lines.append(f"| {job} | {r['programs']} | {r['compile_s_3']:.2f} | {r['compile_s_2']:.2f} | "
                     f"{r['compile_s_quick']:.2f} | {r['compile_s_quick'] / r['compile_s_2']:.2f} | "
                     f"{r['run_ms_3']:.3f} | {r['run_ms_2']:.3f} | {r['run_ms_quick']:.3f} | "
                     f"{r['run_ms_quick'] / r['run_ms_2']:.2f} | {r['same_3']} | {r['same_quick']} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What rounding like eager costs: XLA's CPU code capped at AVX (`LAZYXLA_CPU_FMA=0`, so that
`a * b + c` rounds twice, as eager's kernels do; jaxenv.ROUNDING_FLAG) against XLA's fused
multiply-adds (the default), side by side.

    python -m benchmarks.cpu_rounding                        # the suite's 8 workloads and `chain`
    python -m benchmarks.cpu_rounding --jobs mlp:train,chain --seconds 10

The ISA is fixed when XLA's CPU backend starts, so each setting runs in a process of its own,
with XLA started on one core (as in the suite) and the caller's XLA_FLAGS otherwise (a user's
defaults: no thread flags); the two processes take turns, 3 steps at a time, until --seconds
have passed and each has run 30 steps (median step). Per job each process runs the programs of
one steady lazy-mode step (the same seeds, so the same inputs), compiled as lazyxla compiles
them; `chain` is 10 multiply-adds over 1M float32s, one program. Outputs are compared: bitwise
equal, or the largest difference. Writes benchmarks/results/cpu_rounding.md.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

JOBS = "mlp:infer,mlp:train,transformer:infer,transformer:train,cnn:infer,cnn:train,gpt:infer,gpt:train,chain"
ROOT = pathlib.Path(__file__).resolve().parent.parent
SETTINGS = {"capped": {"LAZYXLA_CPU_FMA": "0"}, "fused": {"LAZYXLA_CPU_FMA": "1"}}  # -> environment


def _programs(job: str) -> list:
    """[(executable, arguments)] of one steady step of `job`, compiled as lazyxla compiles."""
    import jax
    from lazyxla.jaxenv import x64
    from lazyxla.runtime import compiler
    if job == "chain":
        import jax.numpy as jnp

        def chain(x, y):
            for _ in range(10):
                x = x * y + 0.5 * x - y * y
            return x
        args = [jnp.linspace(0, 1, 1 << 20, dtype=jnp.float32), jnp.full((1 << 20,), 0.999, jnp.float32)]
        return [(jax.jit(chain).lower(*args).compile(compiler_options=compiler.compile_options()), args)]
    from benchmarks.opt_level import _captured_programs, executable_arguments
    out = []
    with x64(True):
        for spec, inputs in _captured_programs(job, 1):
            out.append((compiler.compile_spec(spec, donate=False).compiled,  # (run again and again)
                        executable_arguments(spec, inputs)))
    return out


def serve(job: str) -> int:
    """The worker: compiles `job`'s programs, then answers the parent's commands on stdin:
    `run N` (N steps, replies their seconds), `save PATH` (the outputs, .npz), `quit`."""
    import jax
    import numpy as np
    from benchmarks.worker import start_xla_runtime
    from lazyxla import jaxenv
    start_xla_runtime("lazy", 1)
    programs = _programs(job)

    def step():
        with jaxenv.x64(True):
            return jax.block_until_ready([exe(*args) for exe, args in programs])
    step()
    print(json.dumps({"ready": jaxenv.CPU_ROUNDING}), flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "run":
            times = []
            for _ in range(int(arg)):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
            print(json.dumps({"times": times}), flush=True)
        elif cmd == "save":
            outs = [np.asarray(o) for program in step() for o in jax.tree_util.tree_leaves(program)]
            np.savez(arg, *outs)
            print(json.dumps({"saved": len(outs)}), flush=True)
        else:
            return 0
    return 0


def _reply(p) -> dict:
    line = p.stdout.readline()
    if not line:
        raise RuntimeError(f"worker exited {p.wait()}: {p.stderr.read()[-800:]}")
    return json.loads(line)


def measure(job: str, seconds: float, min_steps: int = 30) -> dict:
    import numpy as np
    from benchmarks.opt_level import how_far
    workers = {}
    for name, env in SETTINGS.items():
        full_env = dict(os.environ, **env)
        full_env["XLA_FLAGS"] = " ".join(f for f in full_env.get("XLA_FLAGS", "").split()
                                         if "xla_cpu_max_isa" not in f)  # (the setting decides)
        p = subprocess.Popen([sys.executable, "-m", "benchmarks.cpu_rounding", "--serve", job],
                             cwd=ROOT, env=full_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        workers[name] = (p, _reply(p)["ready"])
    times = {name: [] for name in workers}
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or min(len(t) for t in times.values()) < min_steps:
        for name, (p, _) in workers.items():
            p.stdin.write("run 3\n")
            p.stdin.flush()
            times[name].extend(_reply(p)["times"])
    with tempfile.TemporaryDirectory() as tmp:
        outs = {}
        for name, (p, _) in workers.items():
            path = os.path.join(tmp, f"{name}.npz")
            p.stdin.write(f"save {path}\nquit\n")
            p.stdin.flush()
            _reply(p)
            p.wait(timeout=60)
            with np.load(path) as z:
                outs[name] = [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]
    return {"ms": {name: statistics.median(t) * 1e3 for name, t in times.items()},
            "rounding": {name: r for name, (_, r) in workers.items()},
            "outputs": how_far(list(zip(outs["capped"], outs["fused"])))}


def cpu_description() -> str:
    """The CPU model and count, for a report's header."""
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        import platform
        model = platform.processor() or "unknown"
    return f"{model}, {os.cpu_count()} CPUs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default=JOBS, help=f"comma list of workload:mode or chain (default {JOBS})")
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds per job")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cpu_rounding.md"))
    ap.add_argument("--serve", help=argparse.SUPPRESS)  # (the worker of one setting)
    args = ap.parse_args(argv)
    if args.serve:
        return serve(args.serve)
    from benchmarks.worker import parse_jobs, write_report
    jobs = parse_jobs(ap, args.jobs, names=("chain",))
    if args.seconds <= 0:
        ap.error("--seconds must be above 0")
    rows = []
    for job in jobs:
        r = measure(job, args.seconds)
        rows.append((job, r))
        print(f"{job}: capped {r['ms']['capped']:.3f} ms, fused {r['ms']['fused']:.3f} ms, "
              f"outputs {r['outputs']}", flush=True)
    rounding = rows[0][1]["rounding"]
    lines = ["# XLA's CPU code capped at AVX (LAZYXLA_CPU_FMA=0: each op rounded, as eager) against "
             "fused multiply-adds (the default)",
             "", f"`python -m benchmarks.cpu_rounding --jobs {args.jobs} --seconds {args.seconds:g}` "
             f"on {time.strftime('%Y-%m-%d %H:%M')}. One process per setting (XLA started on one core, "
             f"XLA_FLAGS `{os.environ.get('XLA_FLAGS', '')}` besides the setting's), "
             "taking turns 3 steps at a time, at least 30 steps each (median step): the programs "
             "of one steady lazy-mode step, compiled as lazyxla compiles them. chain: 10 "
             "multiply-adds over 1M float32s.", "",
             f"- CPU: {cpu_description()}",
             f"- capped: {rounding['capped']}", f"- fused: {rounding['fused']}", "",
             "| job | capped ms | fused ms | capped / fused | outputs |", "|---|---:|---:|---:|---|"]
    for job, r in rows:
        c, f = r["ms"]["capped"], r["ms"]["fused"]
        lines.append(f"| {job} | {c:.3f} | {f:.3f} | {c / f:.2f} | {r['outputs']} |")
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

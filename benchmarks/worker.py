"""One benchmark measurement in its own process: `python -m benchmarks.worker '<json job>'`.

The parent (benchmarks/suite.py) sets XLA_FLAGS / OMP_NUM_THREADS before this process starts, so
the thread pinning is in place before torch or jax is imported. Prints one line `RESULT <json>`.
Systems: eager, inductor, lazy (lazyxla lazy mode), compiled (torch.compile backend="lazyxla"; the
"direct" floor is measured in the same process on the executables it captured), torch_xla_lazy,
torch_xla (torch.compile backend="openxla"), torchax (inference only).
"""
from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import sys
import time
import traceback


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _stats(ts):
    ts = sorted(ts)
    p90 = ts[min(len(ts) - 1, int(round(0.9 * (len(ts) - 1))))]
    return {"median_ms": statistics.median(ts) * 1e3, "p90_ms": p90 * 1e3, "min_ms": ts[0] * 1e3,
            "n": len(ts)}


def _dynamo_seconds() -> float:
    """Dynamo's own frame-compile time (includes aot_autograd tracing and the backend's compile
    call, not the lazyxla extraction which happens on the first call of the compiled graph)."""
    try:
        from torch._dynamo.utils import compilation_time_metrics as m
    except Exception:
        return float("nan")
    for k in ("_compile.compile_inner", "compile_inner", "entire_frame_compile"):
        if k in m:
            return float(sum(m[k]))
    return float("nan")


class Runner:
    """Builds step() and block() for one system; counters() reports XLA compiles where known."""

    def __init__(self, job):
        self.job = job
        self.system, self.workload, self.mode = job["system"], job["workload"], job["mode"]
        self.extra = {}

    # ------------------------------------------------------------------ setup per system
    def setup(self):
        import torch
        torch.set_num_threads(self.job["threads"])
        from benchmarks.workloads import make
        model, x, y, loss_fn = make(self.workload)
        train = self.mode == "train"
        model.train(train)
        s = self.system
        self.compiles = lambda: 0
        self.block = lambda out: None
        if s in ("eager", "inductor"):
            dev = None
        elif s in ("lazy", "compiled"):
            import lazyxla
            from lazyxla import metrics
            dev = lazyxla.device()
            self.compiles = lambda: metrics.counter_value("UncachedCompile") or 0
            self.lazyxla = lazyxla
        elif s in ("torch_xla_lazy", "torch_xla"):
            import torch_xla
            import torch_xla.core.xla_model as xm
            import torch_xla.debug.metrics as xmet
            dev = torch_xla.device()
            self.xm = xm
            self.compiles = lambda: (xmet.metric_data("CompileTime") or (0,))[0]
        elif s == "torchax":
            return self._setup_torchax(model, x, y)
        else:
            raise ValueError(f"unknown system {s}")
        if dev is not None:
            model, x = model.to(dev), x.to(dev)
            y = y.to(dev) if y is not None else None
        backend = {"inductor": "inductor", "compiled": "lazyxla", "torch_xla": "openxla"}.get(s)

        def fwd_loss(x, y):
            return loss_fn(model(x), y)
        fwd = model if not train else fwd_loss
        if backend:
            fwd = torch.compile(fwd, backend=backend)
        if train:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            ostep = opt.step
            if backend and self.job.get("compile_optimizer", True):
                ostep = torch.compile(opt.step, backend=backend)

            def step():
                loss = fwd(x, y)
                loss.backward()
                ostep()
                opt.zero_grad(set_to_none=True)
                return loss
        else:
            def step():
                with torch.no_grad():
                    return fwd(x)
        self.step = step
        if s in ("lazy", "compiled"):
            lx = self.lazyxla

            def block(out):
                lx.sync()
                lx.wait()
            self.block = block
        elif s in ("torch_xla_lazy", "torch_xla"):
            xm = self.xm

            def block(out):
                import torch_xla
                torch_xla.sync()
                xm.wait_device_ops()
            self.block = block

    def _setup_torchax(self, model, x, y):
        import torch
        import jax
        import torchax
        if self.mode == "train":
            raise NotImplementedError("torchax training step is not implemented in this suite")
        env = torchax.default_env()
        with env:
            model.to("jax")
            xj = x.to("jax")
        jm = torchax.interop.JittableModule(model)

        def step():
            with env, torch.no_grad():
                return jm(xj)

        def block(out):
            jax.block_until_ready(out._elem if hasattr(out, "_elem") else out.jax())
        self.step, self.block = step, block

    # ------------------------------------------------------------------ measurement
    def run(self):
        job = self.job
        out = {k: job[k] for k in ("system", "workload", "mode")}
        rss0 = _rss_mb()
        t_setup = time.perf_counter()
        self.setup()
        out["setup_s"] = time.perf_counter() - t_setup
        xla_compile = []
        if self.system in ("lazy", "compiled"):
            from lazyxla.runtime import executor
            executor._compile_listeners.append(lambda spec, sec: xla_compile.append(sec))
        rss_setup = _rss_mb()
        t0 = time.perf_counter()
        r = self.step()
        self.block(r)
        out["first_s"] = time.perf_counter() - t0
        out["rss_before_mb"], out["rss_first_mb"] = rss_setup, _rss_mb()
        out["rss_start_mb"] = rss0
        out["compiles_first"] = self.compiles()
        out["xla_compile_first_s"] = sum(xla_compile) if xla_compile else None
        out["dynamo_s"] = _dynamo_seconds() if self.system not in ("eager", "lazy", "torchax", "torch_xla_lazy") else None
        for _ in range(job["warmup"]):
            self.block(self.step())
        out["compiles_warm"] = self.compiles()
        out["xla_compile_total_s"] = sum(xla_compile) if xla_compile else None
        gc.collect()
        # Every variant is timed in alternating rounds, so that a slow phase of a shared machine
        # hits all of them alike: the system itself and, for lazyxla, the floors it is compared to.
        variants = {"system": lambda: self.block(self.step())}
        if self.system == "lazy":
            variants["pipelined"] = self.pipelined()
            variants["eager_here"] = self.eager_here()
        if self.system in ("lazy", "compiled"):
            variants.update(self.direct_calls())
            from lazyxla import metrics
            counters = lambda: {k: metrics.counter_value(k) for k in  # noqa: E731
                                ("UncachedCompile", "CachedCompile", "DynamoExtractCompiledGraph",
                                 "DynamoRetrace", "MarkStep", "RunCachedGraph")}
            if self.system == "compiled":
                before = self.compiles()
                try:
                    floor = self.dynamo_floor() if self.mode == "infer" else self.training_floor()
                except Exception as e:  # the floor is a reference; its failure is reported, not fatal
                    floor, out["dynamo_floor_error"] = None, f"{type(e).__name__}: {e}"[:500]
                out["compiles_warm"] += self.compiles() - before  # the floor's own setup
                if floor is not None:
                    variants["dynamo_floor"] = floor
        times = {k: [] for k in variants}
        deadline = time.perf_counter() + job.get("max_seconds", 60)
        done, per_round = 0, 10
        while done < job["iters"]:
            for name, fn in variants.items():
                ts = times[name]
                # (untimed prefix, timed function[, steps it runs]) or just the timed function
                prefix, fn, steps = (fn + (1,))[:3] if isinstance(fn, tuple) else (None, fn, 1)
                for _ in range(per_round):
                    if prefix is not None:
                        prefix()
                    t0 = time.perf_counter()
                    fn()
                    ts.append((time.perf_counter() - t0) / steps)
            done += per_round
            if time.perf_counter() > deadline and done >= 20:
                break
        out.update(_stats(times.pop("system")))
        out["compiles_steady"] = self.compiles() - out["compiles_warm"]
        if self.system in ("lazy", "compiled"):
            out["counters"] = counters()
            from lazyxla.jaxenv import CPU_ROUNDING, HOST_MEMORY
            out["cpu_rounding"], out["host_memory"] = CPU_ROUNDING, HOST_MEMORY
            out["direct"] = dict(_stats(times.pop("direct")), executables=len(self.captured))
            out["direct"]["cold"] = _stats(times.pop("direct_cold"))
            out["direct"]["polled"] = _stats(times.pop("direct_polled"))
            if "dynamo_floor" in times:
                out["dynamo_floor"] = _stats(times.pop("dynamo_floor"))
            if "pipelined" in times:
                out["pipelined"] = _stats(times.pop("pipelined"))
            if "eager_here" in times:
                out["eager_here"] = _stats(times.pop("eager_here"))
        out["ok"] = True
        return out

    def pipelined(self, steps=10):
        """Lazy mode as a training loop runs it: sync() after every step, which dispatches the
        step's program without waiting for it, so XLA executes step n on its own thread while
        Python records step n+1; one wait() per `steps`. Timed per step."""
        lx = self.lazyxla

        def run():
            for _ in range(steps):
                out = self.step()  # kept while syncing, as in the latency loop: the same program
                lx.sync()
            lx.wait()
            return out
        return (None, run, steps)

    def eager_here(self):
        """Eager PyTorch on the CPU, the same step, timed in this process in rounds alternating
        with lazy mode's: the lazy/eager ratio then compares runs that met the same phases of a
        shared machine (the eager job runs minutes apart, in another process)."""
        import torch
        from benchmarks.workloads import make
        model, x, y, loss_fn = make(self.workload)
        model.train(self.mode == "train")
        if self.mode == "train":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

            def step():
                loss_fn(model(x), y).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        else:
            def step():
                with torch.no_grad():
                    model(x)
        for _ in range(3):
            step()
        return step

    def direct_calls(self) -> dict:
        """The floor: the executables lazyxla ran for one step, called through JAX with the very
        inputs it fed them (already device arrays), blocking on their outputs; the same after
        reading an unrelated 8 MB array (untimed), which evicts them from the L1/L2 caches; and
        the same waiting as lazyxla.wait() does (polling first on the CPU backend)."""
        import jax
        import numpy as np
        from lazyxla.jaxenv import wait_ready, x64
        from lazyxla.runtime import executor
        captured = []
        orig = executor.execute_arguments

        def capture(program, arguments):  # (lazy mode's execute() calls it too)
            with x64(True):  # pre-converted: the RNG seeds too; donated arrays are copied, since
                # the run consumes them (each direct call is fed fresh copies: fresh_inputs)
                captured.append((program.compiled, [
                    jax.device_put(a) if isinstance(a, np.ndarray) else
                    jax.device_put(a, may_alias=False) if i in program.donated else a
                    for i, a in enumerate(arguments)], program.donated))
            return orig(program, arguments)
        executor.execute_arguments = capture
        try:
            self.block(self.step())
        finally:
            executor.execute_arguments = orig
        self.captured = captured
        other = np.ones(1 << 20)
        fresh = self.fresh_inputs()

        def direct():
            with x64(True):
                jax.block_until_ready([exe(*inp) for (exe, _, _), inp in zip(captured, fresh)])

        def direct_polled():  # waiting as lazyxla.wait() does (polling first on the CPU backend)
            with x64(True):
                wait_ready(jax.tree_util.tree_leaves([exe(*inp) for (exe, _, _), inp in zip(captured, fresh)]))
        # (untimed prefix, timed)
        return {"direct": (fresh.refill, direct),
                "direct_cold": (lambda: (fresh.refill(), other.sum()), direct),
                "direct_polled": (fresh.refill, direct_polled)}

    def fresh_inputs(self):
        """The captured calls' inputs, as a list per call, with fresh copies of the arrays each
        executable takes as donated (a run consumes them) made by `refill()`, untimed, before
        every timed call: lazyxla's own runs donate the data their updates replace."""
        import jax
        from lazyxla.jaxenv import x64

        class Fresh(list):
            def refill(self):
                with x64(True):
                    for (_, inp, donated), now in zip(captured, self):
                        for i in donated:
                            now[i] = jax.device_put(inp[i], may_alias=False)
        captured = self.captured
        fresh = Fresh([list(inp) for _, inp, _ in captured])
        fresh.refill()
        return fresh

    def dynamo_floor(self):
        """The least any torch.compile backend can cost per call on this executable: Dynamo (frame
        evaluation, guards, module call) in front of a backend whose compiled function only calls
        the captured executable on its captured inputs. Inference with one executable only."""
        import jax
        import torch
        from benchmarks.workloads import make
        from lazyxla.jaxenv import wait_ready, x64
        if len(self.captured) != 1:
            return None
        (exe, _, _), = self.captured
        fresh = self.fresh_inputs()
        inp = fresh[0]
        model, x, _, _ = make(self.workload)
        dev = self.lazyxla.device()
        model, x = model.to(dev).eval(), x.to(dev)
        with torch.no_grad():
            placeholder = model(x)  # an output tensor of the right kind for Dynamo to hand back
        self.lazyxla.sync()
        box = []

        def backend(gm, example_inputs):
            def run(*args):
                with x64(True):
                    box[:] = [exe(*inp)]
                return (placeholder,)
            return run
        fm = torch.compile(model, backend=backend)

        def call():
            with torch.no_grad():
                fm(x)
            wait_ready(jax.tree_util.tree_leaves(box))  # (waiting as lazyxla does)
        for _ in range(5):
            fresh.refill()
            call()
        return (fresh.refill, call)

    def training_floor(self):
        """The least any torch.compile backend can cost per training step on these executables:
        the same step (Dynamo, aot_autograd's runtime wrappers, the autograd engine, torch.optim's
        Python outside its graph, zero_grad) on a second copy of the model, whose forward and
        backward compilers (through aot_autograd) and optimizer backend only call the captured
        executables on their captured inputs and hand back fresh aliases of outputs made once.
        The captured calls must be the step's three programs, in order: forward, backward,
        optimizer step; None otherwise."""
        import jax
        import torch
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch.aot_autograd import make_boxed_func
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from benchmarks.workloads import make
        from lazyxla.jaxenv import wait_ready, x64
        if len(self.captured) != 3 or not self.job.get("compile_optimizer", True):
            return None
        lx, dev, box = self.lazyxla, self.lazyxla.device(), []

        def outputs_like(gm):  # real lazyxla tensors shaped as the graph's outputs, made once
            out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
            out = out if isinstance(out, (list, tuple)) else [out]
            vals = [getattr(a, "meta", {}).get("val", a) for a in out]
            with unset_fake_temporarily():  # (compilers run under fake mode)
                made = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=dev)
                        if isinstance(v, torch.Tensor) else v for v in vals]
            lx.sync()
            return made

        def calling(exe, inputs, boxed=True):  # boxed: aot_autograd's calling convention
            def compiler(gm, example_inputs):
                made = outputs_like(gm)

                def run(*args):
                    with x64(True):
                        box.append(exe(*inputs))
                    # fresh tensors, as a backend's are: AccumulateGrad then keeps a gradient
                    # instead of copying it
                    return [t.detach() if isinstance(t, torch.Tensor) else t for t in made]
                return make_boxed_func(run) if boxed else run
            return compiler
        fresh = self.fresh_inputs()
        (fw, _, _), (bw, _, _), (op, _, _) = self.captured
        fw_in, bw_in, op_in = fresh
        model, x, y, loss_fn = make(self.workload)
        model, x, y = model.to(dev), x.to(dev), y.to(dev)
        backend = aot_autograd(fw_compiler=calling(fw, fw_in), bw_compiler=calling(bw, bw_in))
        fwd = torch.compile(lambda x, y: loss_fn(model(x), y), backend=backend)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        ostep = torch.compile(opt.step, backend=calling(op, op_in, boxed=False))

        def step():
            fwd(x, y).backward()
            ostep()
            opt.zero_grad(set_to_none=True)
            wait_ready(jax.tree_util.tree_leaves(box))  # (waiting as lazyxla does)
            box.clear()
            lx.sync()  # aot_autograd's write-backs of mutated inputs (BatchNorm's statistics)
        for _ in range(5):
            fresh.refill()
            step()
        return (fresh.refill, step)


def run_dynamic(job):
    """100 (or n) distinct sequence lengths through torch.compile(dynamic=True)."""
    import torch
    torch.set_num_threads(job["threads"])
    from benchmarks.workloads import make
    lengths = list(range(16, 16 + job["n_lengths"]))
    model, _, _, _ = make("dyn")
    model.eval()
    system = job["system"]
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(1, L, 64, generator=g) for L in lengths]
    if system == "compiled":
        import lazyxla
        from lazyxla import metrics
        dev = lazyxla.device()
        model = model.to(dev)
        xs = [x.to(dev) for x in xs]
        cm = torch.compile(model, backend="lazyxla", dynamic=True)
        compiles = lambda: metrics.counter_value("UncachedCompile") or 0  # noqa: E731
        block = lambda: lazyxla.wait()  # noqa: E731
    else:
        cm = torch.compile(model, backend="inductor", dynamic=True)
        compiles = lambda: None  # noqa: E731
        block = lambda: None  # noqa: E731
    t0 = time.perf_counter()
    per = []
    with torch.no_grad():
        for x in xs:
            t1 = time.perf_counter()
            cm(x)
            block()
            per.append(time.perf_counter() - t1)
    total = time.perf_counter() - t0
    out = {"system": system, "workload": "dyn", "mode": "dynamic", "ok": True,
           "n_lengths": len(lengths), "total_s": total, "first_s": per[0],
           "median_ms": statistics.median(per) * 1e3, "compiles": compiles(),
           "rss_mb": _rss_mb()}
    try:
        from torch._dynamo.utils import counters
        out["dynamo_frames"] = int(counters["stats"]["unique_graphs"])
    except Exception:
        pass
    if system == "compiled":
        out["dynamo_retrace"] = metrics.counter_value("DynamoRetrace") or 0
        # a second pass over the same lengths: all cached
        t0 = time.perf_counter()
        with torch.no_grad():
            for x in xs:
                cm(x)
        block()
        out["second_pass_s"] = time.perf_counter() - t0
        out["compiles_after_second_pass"] = compiles()
    return out


def _warm_lazyxla():
    import lazyxla  # noqa: F401  (first, as a user's script: its XLA flags are set before JAX's
    _warm_jax()     # backend starts)


def _warm_jax():
    import jax
    import jax.numpy as jnp
    a = jnp.ones((64, 64))
    jax.block_until_ready(jax.jit(lambda a: a @ a + 1)(a))


def _warm_torch_xla():
    import torch
    import torch_xla
    t = torch.ones(64, 64, device=torch_xla.device())
    (t @ t + 1).cpu()


_XLA_RUNTIMES = {"lazy": _warm_lazyxla, "compiled": _warm_lazyxla, "torchax": _warm_jax,
                 "torch_xla_lazy": _warm_torch_xla, "torch_xla": _warm_torch_xla}


def parse_jobs(ap, text: str, names=()) -> list[str]:
    """The jobs of a --jobs list: workload:mode pairs (and the plain `names` a tool adds); anything
    else is a usage error through argparse `ap` (exit status 2), before any job runs."""
    from benchmarks.workloads import WORKLOADS
    jobs = [j for j in text.split(",") if j]

    def valid(j):
        w, _, m = j.partition(":")
        return j in names or (w in WORKLOADS and m in ("infer", "train"))
    bad = [j for j in jobs if not valid(j)]
    if bad or not jobs:
        extra = "".join(f"{n} or " for n in names)
        ap.error(f"--jobs: {bad or 'none'}: each is {extra}workload:mode, workload one of "
                 f"{','.join(WORKLOADS)}, mode infer or train")
    return jobs


def side_by_side(argv, doc: str, jobs: str, out: str, child) -> tuple | None:
    """The command line of a benchmark that runs workload:mode:system jobs (lazyxla's systems)
    with a setting and without, a process per side, alternating: (its parsed arguments, the jobs
    as tuples); None in a child process, which ran `child(workload, mode, system,
    seconds)` and printed its RESULT."""
    import argparse
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default=jobs, help=f"comma list of workload:mode:system (default {jobs})")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0, help="timed seconds per process")
    ap.add_argument("--out", default=out)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        workload, mode, system, seconds = args.child
        print("RESULT " + json.dumps(child(workload, mode, system, float(seconds))), flush=True)
        return None
    from benchmarks.workloads import WORKLOADS
    parsed = [tuple(j.split(":")) for j in args.jobs.split(",")]
    for j in parsed:
        if len(j) != 3 or j[0] not in WORKLOADS or j[1] not in ("infer", "train") \
                or j[2] not in ("lazy", "compiled"):
            ap.error(f"bad job {':'.join(j)!r}: expected workload:infer|train:lazy|compiled, "
                     f"workload one of {', '.join(WORKLOADS)}")
    if args.rounds < 1 or args.seconds <= 0:
        ap.error("--rounds must be at least 1 and --seconds above 0")
    return args, parsed


def alternating(sides, rounds: int, run) -> dict:
    """{side: [run(side) of each round]}: the sides run one after the other, round after round,
    so a slow phase of a shared machine does not decide one side."""
    runs = {side: [] for side in sides}
    for _ in range(rounds):
        for side in sides:
            runs[side].append(run(side))
    return runs


def write_report(lines, out) -> None:
    """Write a markdown report to `out` (making its folder) and print it."""
    import pathlib
    text = "\n".join(lines) + "\n"
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(out).write_text(text)
    print(text)


def steady_state(workload: str, mode: str, system: str, seconds: float, probe=None) -> dict:
    """One process's steady-state step of a lazyxla system (one core for XLA, as in the suite),
    for the benchmarks that compare a setting side by side, a process per side: the median step,
    CPU time (all threads) and minor page faults per step, the process's peak RSS, and the peak
    RSS of the timed steps alone (the kernel's high-water mark reset after warm-up; None where it
    cannot be). `probe`: a function returning {name: number} (counters), whose change over the
    timed steps is returned per step."""
    start_xla_runtime(system, 1)
    runner = Runner({"system": system, "workload": workload, "mode": mode, "threads": 1})
    runner.setup()
    for _ in range(5):
        runner.block(runner.step())
    steady_peak = _reset_peak_rss()
    faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # noqa: E731
    probed = probe() if probe else {}
    times, f0, c0 = [], faults(), time.process_time()
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(times) < 10:
        t = time.perf_counter()
        runner.block(runner.step())
        times.append(time.perf_counter() - t)
    n = len(times)
    per_step = {k: (v - probed[k]) / n for k, v in probe().items()} if probe else {}
    return {**per_step, "median_ms": statistics.median(times) * 1e3, "cpu_ms": (time.process_time() - c0) / n * 1e3,
            "faults_per_step": (faults() - f0) / n, "steps": n,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "steady_rss_mb": _peak_rss_mb() if steady_peak else None}


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process (Linux: /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _peak_rss_mb() is not None
    except OSError:
        return False


def _peak_rss_mb() -> float | None:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def start_xla_runtime(system, threads) -> int | None:
    """Start the system's XLA runtime with `threads` compute threads; returns the cores it was
    started on (None: no XLA runtime, or no affinity control). XLA's CPU runtime sizes its thread
    pools by the process's CPU affinity when it starts, and no XLA flag caps them any more (with
    XLA_FLAGS alone a matmul used 1.9 cores, against eager's 1): started on `threads` cores, its
    threads stay there; the main thread then gets every core back, as it records and dispatches
    while XLA runs."""
    warm = _XLA_RUNTIMES.get(system)
    if warm is None or not hasattr(os, "sched_setaffinity"):
        return None
    cores = os.sched_getaffinity(0)
    pinned = set(sorted(cores)[:threads])
    os.sched_setaffinity(0, pinned)
    try:
        warm()  # (an executed program: the pools that start lazily have started too)
    finally:
        os.sched_setaffinity(0, cores)
    return len(pinned)


def main(argv=None):
    job = json.loads((argv or sys.argv[1:])[0])
    job.setdefault("threads", 1)
    out = {"system": job.get("system"), "workload": job.get("workload"), "mode": job.get("mode")}
    try:
        xla_cores = start_xla_runtime(job.get("system"), job["threads"])
        if job.get("mode") == "record":
            from benchmarks import record_ops
            out = record_ops.run(job)
        else:
            out = run_dynamic(job) if job.get("mode") == "dynamic" else Runner(job).run()
        out["xla_cores"] = xla_cores
    except Exception as e:  # reported in the table, not hidden
        out.update(ok=False, error=f"{type(e).__name__}: {e}".strip()[:2000],
                   traceback=traceback.format_exc()[-4000:])
    out["loadavg_end"] = os.getloadavg()[0]
    sys.stdout.flush()
    print("RESULT " + json.dumps(out, default=float), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

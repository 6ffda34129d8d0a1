"""cProfile of the per-call Python time of torch.compile(backend="lazyxla") on MLP inference (and
the training step), next to the bare executable; then the bridge's parts per compiled graph of the
MLP training step, timed inside the running step. `python -m benchmarks.profile_call OUT [calls]`."""
from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time


def _median_us(fn, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e6


def attribute(pr, calls) -> str:
    """Self time per area, in microseconds per call (cProfile inflates Python time ~2-3x)."""
    areas = {}
    for (fname, _, func), (_, _, tt, _, _) in pstats.Stats(pr).stats.items():
        f = fname.replace("\\", "/")
        if "jax/_src/stages.py" in f or "jaxlib" in f or (fname == "~" and "jax" in func.lower()):
            a = "XLA executable call (jax Compiled.__call__ and below)"
        elif "/lazyxla/dynamo/" in f:
            a = "lazyxla bridge (bridge.py, matcher.py, outputs.py, backend.py)"
        elif "/lazyxla/" in f:
            a = "lazyxla runtime (executor.execute_arguments, metrics, buffers)"
        elif "torch/_functorch" in f or "torch/_subclasses" in f:
            a = "aot_autograd runtime wrappers"
        elif "torch/_dynamo" in f or "torch/_guards" in f or "eval_frame" in f or "<string>" in f:
            a = "Dynamo (frame eval, guards, disable wrappers)"
        elif "torch/autograd" in f or "run_backward" in func:
            a = "autograd engine"
        elif "torch/" in f:
            a = "other torch Python (nn.Module call, streams, utils)"
        else:
            a = f"builtins/other ({func[:40]})" if fname == "~" else "other"
        if a.startswith("builtins/"):
            a = "builtins (getattr, isinstance, untyped_storage, ...)"
        areas[a] = areas.get(a, 0.0) + tt
    total = sum(areas.values())
    lines = [f"  {v / calls * 1e6:8.1f} us/call  {100 * v / total:5.1f}%  {k}"
             for k, v in sorted(areas.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)


_PARTS = ("matcher", "guard_donated", "execute", "write_back", "outputs")


def bridge_parts(step, steps) -> str:
    """The bridge's time per call of each compiled graph that `step` runs, split into its parts
    (medians over `steps` steps, microseconds): the input matcher (with any pending input it
    syncs: the backward's grad seed), the donation guard, the executable's call
    (executor.execute_arguments: JAX's dispatch, and the run where the CPU client runs it on the
    calling thread), the write-back of updated arguments and the outputs; `other` is
    the rest of the call (the program lookup, the lock). Timed by wrappers around the parts, inside
    the running step, where the interpreter's caches are as cold as a training loop leaves them
    (each wrapper adds about 0.3 us); cProfile's inflation does not enter."""
    import statistics
    from lazyxla.dynamo import bridge, matcher, outputs
    from lazyxla.runtime import executor
    now = time.perf_counter_ns
    calls, this = {}, {}  # graph name -> [per call {part: ns}]; the call being timed
    m = matcher.InputMatcher
    patched = [(m, "__call__", "matcher"), (m, "guard_donated", "guard_donated"),
               (m, "write_back", "write_back"), (outputs.OutputHandler, "__call__", "outputs"),
               (executor, "execute_arguments", "execute")]
    bridge_call = bridge.Bridge.__call__
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patched] + \
        [(bridge.Bridge, "__call__", bridge_call)]

    inside = []  # the part running now: one within it (a program the matcher runs to sync an
    # input) is that part's time, not counted twice

    def timing(fn, part):
        def timed(*args, **kwargs):
            if inside:
                return fn(*args, **kwargs)
            inside.append(part)
            t0 = now()
            try:
                return fn(*args, **kwargs)
            finally:
                this[part] = this.get(part, 0) + now() - t0
                inside.pop()
        return timed

    def whole(b, *args, **kwargs):
        this.clear()
        t0 = now()
        try:
            return bridge_call(b, *args, **kwargs)
        finally:
            total = now() - t0
            calls.setdefault(b.name, []).append(dict(this, other=total - sum(this.values()), call=total))
    try:
        for (owner, attr, part), (_, _, fn) in zip(patched, saved):
            setattr(owner, attr, timing(fn, part))
        bridge.Bridge.__call__ = whole
        for _ in range(steps):
            step()
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)
    cols = ("call",) + _PARTS + ("other",)
    lines = ["| graph | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, per in calls.items():
        lines.append(f"| {name} | " + " | ".join(
            f"{statistics.median(c.get(k, 0) for c in per) / 1e3:.1f}" for k in cols) + " |")
    return "\n".join(lines)


def main(out_path, calls=3000, threads=1):
    import torch
    torch.set_num_threads(int(threads))
    import jax
    import lazyxla
    from lazyxla.jaxenv import x64
    from lazyxla.runtime import executor
    from benchmarks.workloads import make
    calls = int(calls)
    model, x, y, loss_fn = make("mlp")
    dev = lazyxla.device()
    model, x, y = model.to(dev).eval(), x.to(dev), y.to(dev)
    cm = torch.compile(model, backend="lazyxla")
    report = io.StringIO()
    with torch.no_grad():
        for _ in range(5):
            cm(x)
        lazyxla.wait()
        captured = []
        orig = executor.execute_arguments
        executor.execute_arguments = lambda prog, arguments: (
            captured.append((prog.compiled, list(arguments))), orig(prog, arguments))[1]
        cm(x)
        executor.execute_arguments = orig
        exe, inp = captured[0]

        def compiled():
            out = cm(x)  # held: wait() waits only for results still referenced
            lazyxla.wait()
            return out

        def direct():
            jax.block_until_ready(exe(*inp))
        with x64(True):
            d = _median_us(direct, calls)
        c = _median_us(compiled, calls)
        c_nowait = _median_us(lambda: cm(x), calls)
        lazyxla.wait()
        print(f"MLP inference, median per call: compiled {c:.1f} us, direct {d:.1f} us "
              f"(ratio {c / d:.2f}); compiled call without blocking (Python dispatch cost): "
              f"{c_nowait:.1f} us", file=report)
        print("Note: lazyxla runs backward on the calling thread (no CUDA/XPU/MPS here), so the "
              "backward graphs' bridge and executable time is attributed like the forward's; with "
              "LAZYXLA_AUTOGRAD_DEVICE_THREADS=1 it would hide in 'autograd engine'.", file=report)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(calls):
            cm(x)
        lazyxla.wait()
        pr.disable()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s).strip_dirs()
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats(30)
    print(f"\nSelf time by area under cProfile, MLP inference ({calls} calls):", file=report)
    print(attribute(pr, calls), file=report)
    print(f"\ncProfile of {calls} compiled calls (MLP inference, no blocking per call):", file=report)
    print(s.getvalue(), file=report)
    # training step: forward/backward through aot_autograd's runtime wrappers
    model, x, y, loss_fn = make("mlp")
    model, x, y = model.to(dev).train(), x.to(dev), y.to(dev)
    f = torch.compile(lambda a, b: loss_fn(model(a), b), backend="lazyxla")
    params = list(model.parameters())

    def fwd_bwd():
        f(x, y).backward()
        for p in params:  # set_to_none: every step the same graphs, nothing accumulates lazily
            p.grad = None
    for _ in range(5):
        fwd_bwd()
    lazyxla.sync(wait=True)
    n = max(calls // 5, 200)
    t = _median_us(lambda: (fwd_bwd(), lazyxla.wait()), n)
    print(f"\nMLP forward+backward (compiled, no optimizer), median {t:.1f} us per step", file=report)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fwd_bwd()
    lazyxla.sync(wait=True)
    pr.disable()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s).strip_dirs()
    st.sort_stats("tottime").print_stats(30)
    print(f"\nSelf time by area under cProfile, MLP forward+backward ({n} steps):", file=report)
    print(attribute(pr, n), file=report)
    print(f"\ncProfile of {n} compiled forward+backward calls (MLP train):", file=report)
    print(s.getvalue(), file=report)
    # the whole training step, the optimizer's step compiled too: the bridge's parts, in the step
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ostep = torch.compile(opt.step, backend="lazyxla")

    def train_step():
        f(x, y).backward()
        ostep()
        opt.zero_grad(set_to_none=True)
        lazyxla.sync()
        lazyxla.wait()
    for _ in range(5):
        train_step()
    print(f"\nThe bridge's time per call of each compiled graph of the MLP training step (forward, "
          f"backward, AdamW step) and its parts, timed inside the running step (medians over {n} "
          f"steps, us; execute: the executable's call; other: the program lookup, the lock):",
          file=report)
    print(bridge_parts(train_step, n), file=report)
    text = report.getvalue()
    open(out_path, "w").write(text)
    print(text[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

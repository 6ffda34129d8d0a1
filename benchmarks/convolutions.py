"""Convolutions on XLA's CPU backend, lazyxla's lowerings with and without their CPU forms, beside
eager: weight gradients as one convolution (jax.vjp of the forward) against lowering/conv_grad.py
(1x1 kernels as a matrix product, other 2-d convolutions over batch chunks), per layer shape; the
ResNet training step's program compiled three ways (no forms; forms; forms and channels-last,
runtime/channels_last.py), and small networks' programs channels-first and channels-last; and 3-d
convolutions as XLA's 3-d convolution against lowering/conv3d.py (sums of 2-d convolutions over
the depth taps), forward and backward.

    python -m benchmarks.convolutions            # writes benchmarks/results/convolutions.md
    python -m benchmarks.convolutions --quick    # 4 layer shapes, 2 3-d ones, no whole program

One process; XLA on one core and torch on one thread, as in the suite. Each layer: the weight
gradient alone (input gradient not asked for), median of 9 runs after one; the forms' results are
compared with eager's in float64. The programs: lazy mode's steps, each compiled each way, the ways
alternating in rounds of 3 runs (median). 3-d: the forward (nn.convolution) and all three
gradients (nn.convolution_backward), median of 5 runs after one.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# (batch, in channels, out channels, image side, kernel, stride, dtype)
LAYERS = [(32, 3, 32, 32, 3, 1, "float32"), (32, 32, 32, 32, 3, 1, "float32"),
          (32, 32, 64, 32, 3, 2, "float32"), (32, 32, 64, 32, 1, 2, "float32"),
          (32, 64, 64, 16, 3, 1, "float32"), (32, 64, 128, 16, 3, 2, "float32"),
          (32, 128, 128, 8, 3, 1, "float32"), (32, 256, 256, 4, 3, 1, "float32"),
          (8, 16, 16, 64, 3, 1, "float32"), (8, 64, 64, 64, 3, 1, "float32"),
          (16, 64, 64, 56, 3, 1, "float32"), (8, 64, 256, 56, 1, 1, "float32"),
          (4, 3, 64, 112, 7, 2, "float32"), (128, 32, 32, 32, 3, 1, "float32"),
          (256, 32, 32, 32, 3, 1, "float32"),
          (32, 32, 32, 32, 3, 1, "float64"), (32, 64, 64, 16, 3, 1, "float64")]
QUICK = [LAYERS[1], LAYERS[3], LAYERS[4], LAYERS[6]]
# 3-d: (batch, in channels, out channels, (depth, height, width), kernel, stride, transposed)
LAYERS_3D = [(4, 32, 32, (8, 32, 32), 3, 1, False), (4, 32, 64, (8, 32, 32), 3, 2, False),
             (4, 64, 64, (4, 16, 16), 3, 1, False), (2, 3, 32, (16, 64, 64), 3, 1, False),
             (4, 32, 32, (8, 32, 32), (1, 3, 3), 1, False), (4, 32, 32, (8, 32, 32), (3, 1, 1), 1, False),
             (4, 64, 32, (4, 16, 16), 3, 2, True), (4, 32, 16, (8, 32, 32), 2, 2, True),
             (2, 32, 32, (8, 16, 16), 3, 1, True)]
QUICK_3D = [LAYERS_3D[0], LAYERS_3D[6]]


def _median_ms(fn, runs=9) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _lowering(use_forms: bool):
    """lazyxla's convolution_backward lowering, with or without conv_grad's forms."""
    from lazyxla.lowering import conv_grad, nn

    def weight_grad(g, x, w, stride, padding):
        saved = conv_grad.applies
        conv_grad.applies = saved if use_forms else (lambda x: False)
        try:
            return nn.convolution_backward(g, x, w, None, [stride] * 2, [padding] * 2, [1, 1], False,
                                           [0, 0], 1, [False, True, False])[1]
        finally:
            conv_grad.applies = saved
    return weight_grad


def layer(n, cin, cout, side, k, stride, dtype) -> dict:
    import jax
    import numpy as np
    import torch
    from lazyxla.jaxenv import x64
    tdt = getattr(torch, dtype)
    g0 = torch.Generator().manual_seed(0)
    x = torch.randn(n, cin, side, side, generator=g0, dtype=tdt)
    w = torch.randn(cout, cin, k, k, generator=g0, dtype=tdt) * 0.1
    pad = k // 2
    out = (side + 2 * pad - k) // stride + 1
    g = torch.randn(n, cout, out, out, generator=g0, dtype=tdt)
    args = ([stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1, [False, True, False])
    eager = torch.ops.aten.convolution_backward
    ref = eager(g.double(), x.double(), w.double(), None, *args)[1].numpy()
    row = {"eager_ms": _median_ms(lambda: eager(g, x, w, None, *args))}
    with x64(True):
        jx, jw, jg = (jax.device_put(t.numpy()) for t in (x, w, g))
        for name, use in (("one_ms", False), ("forms_ms", True)):
            low = _lowering(use)
            fn = jax.jit(lambda g_, x_, w_, low=low: low(g_, x_, w_, stride, pad))
            got = np.asarray(fn(jg, jx, jw))
            row[name] = _median_ms(lambda fn=fn: jax.block_until_ready(fn(jg, jx, jw)))
            row[name.replace("_ms", "_err")] = float(np.abs(got - ref).max() / np.abs(ref).max())
    eager_err = eager(g, x, w, None, *args)[1].double().numpy()
    row["eager_err"] = float(np.abs(eager_err - ref).max() / np.abs(ref).max())
    return row


def layer_3d(n, cin, cout, size, k, stride, transposed=False) -> dict:
    """Forward and backward of one 3-d layer: eager, XLA's 3-d convolution, lazyxla's depth taps.
    Transposed: padding k // 2 and output padding stride - 1 (a decoder's doubling)."""
    import jax
    import numpy as np
    import torch
    from lazyxla.jaxenv import x64
    from lazyxla.lowering import conv3d, nn
    k = (k,) * 3 if isinstance(k, int) else tuple(k)
    pad = [d // 2 for d in k]
    g0 = torch.Generator().manual_seed(0)
    x = torch.randn(n, cin, *size, generator=g0)
    w = torch.randn(*((cin, cout) if transposed else (cout, cin)), *k, generator=g0) * 0.1
    outpad = [stride - 1 if d > 1 else 0 for d in k] if transposed else [0, 0, 0]
    conv_args = ([stride] * 3, pad, [1, 1, 1], transposed, outpad, 1)

    def eager_fwd():
        return torch.ops.aten.convolution(x, w, None, *conv_args)
    y = eager_fwd()
    g = torch.randn(y.shape, generator=g0)
    row = {"eager_fwd_ms": _median_ms(eager_fwd, 5),
           "eager_bwd_ms": _median_ms(lambda: torch.ops.aten.convolution_backward(
               g, x, w, [cout], *conv_args, [True, True, True]), 5)}
    saved = conv3d.applies
    with x64(True):
        jx, jw, jg = (jax.device_put(t.numpy()) for t in (x, w, g))
        for name, use in (("xla", False), ("taps", True)):
            conv3d.applies = saved if use else (lambda *a: False)
            try:
                fwd = jax.jit(lambda a, b: nn.convolution(a, b, None, *conv_args))
                bwd = jax.jit(lambda gg, a, b: nn.convolution_backward(gg, a, b, [cout], *conv_args,
                                                                     [True, True, True]))
                out = np.asarray(fwd(jx, jw))
                row[f"{name}_fwd_ms"] = _median_ms(lambda: jax.block_until_ready(fwd(jx, jw)), 5)
                row[f"{name}_bwd_ms"] = _median_ms(lambda: jax.block_until_ready(bwd(jg, jx, jw)), 5)
            finally:
                conv3d.applies = saved
            row[f"{name}_err"] = float(np.abs(out - y.numpy()).max() / np.abs(y.numpy()).max())
    return row


# (use conv_grad.py's forms, evaluate channels-last: runtime/channels_last.py)
FORMS = {"one": (False, False), "forms": (True, False), "lazyxla": (True, True)}


def programs_compared(spec, inputs, seconds: float, forms, min_runs: int = 15) -> dict:
    """One program compiled with each of `forms` (keys of FORMS), run alternating in rounds of 3:
    {form: (median run ms, XLA compile s)}, and "max_diff", the outputs' largest difference."""
    import jax
    import numpy as np
    from lazyxla.jaxenv import x64
    from lazyxla.lowering import conv_grad
    from benchmarks.opt_level import alternating_medians_ms
    from lazyxla.runtime import channels_last, compiler
    feed = compiler._feeder(spec)
    saved = conv_grad.applies, channels_last.applies
    compiled, compile_s = {}, {}
    with x64(True):
        args = [jax.device_put(a) if isinstance(a, np.ndarray) else a
                for a in (feed(inputs) if feed else inputs)]
        for form in forms:
            use_forms, use_layout = FORMS[form]
            conv_grad.applies = saved[0] if use_forms else (lambda x: False)
            channels_last.applies = saved[1] if use_layout else (lambda s: False)
            try:
                lowered = jax.jit(compiler.build_function(spec, None)).lower(*compiler.param_avals(spec))
            finally:
                conv_grad.applies, channels_last.applies = saved
            t0 = time.perf_counter()
            compiled[form] = lowered.compile(compiler_options=compiler.compile_options())
            compile_s[form] = time.perf_counter() - t0

    def run(form):
        with x64(True):
            return jax.block_until_ready(compiled[form](*args))
    outs = {form: [np.asarray(o) for o in run(form)] for form in forms}
    first = outs[forms[0]]
    diff = max((float(np.max(np.abs(a.astype(np.float64) - b))) for form in forms[1:]
                for a, b in zip(first, outs[form]) if a.dtype.kind == "f" and a.size), default=0.0)
    run_ms = alternating_medians_ms(run, forms, seconds, min_runs)
    result = {form: (run_ms[form], compile_s[form]) for form in forms}
    result["max_diff"] = diff
    return result


def _small_programs():
    """(name, step) of small convolutional networks' lazy-mode steps."""
    import torch
    from torch import nn
    import lazyxla

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
            self.low = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
                                     nn.ReLU(), nn.ConvTranspose2d(32, 16, 2, stride=2))
            self.up = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
                                    nn.Conv2d(16, 1, 1))

        def forward(self, x):
            a = self.down(x)
            return self.up(torch.cat([a, self.low(a)], 1))
    torch.manual_seed(0)
    nets = [
        ("UNet (BatchNorm, max pool, transposed, upsampling), 4x3x32x32, training", UNet(),
         (4, 3, 32, 32), True),
        ("1-d feature extractor (wav2vec2's: k10 s5, GroupNorm, GELU), 4x1x16000, training",
         nn.Sequential(nn.Conv1d(1, 64, 10, stride=5), nn.GroupNorm(64, 64), nn.GELU(),
                       nn.Conv1d(64, 64, 3, stride=2), nn.GELU(), nn.Conv1d(64, 64, 2, stride=2), nn.GELU()),
         (4, 1, 16000), True),
        ("2-d, GroupNorm(8), 4x64x32x32, training",
         nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.GroupNorm(8, 64), nn.SiLU(),
                       nn.Conv2d(64, 64, 3, padding=1)), (4, 64, 32, 32), True),
        ("depthwise separable, BatchNorm, ReLU6, pooled, 8x3x64x64, inference",
         nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU6(),
                       nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.BatchNorm2d(32), nn.ReLU6(),
                       nn.Conv2d(32, 64, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).eval(),
         (8, 3, 64, 64), False),
        ("3-d, BatchNorm, stride 2, (3,1,1) kernel, 2x3x8x32x32, training",
         nn.Sequential(nn.Conv3d(3, 16, 3, padding=1), nn.BatchNorm3d(16), nn.ReLU(),
                       nn.Conv3d(16, 16, 3, padding=1, stride=2), nn.BatchNorm3d(16), nn.ReLU(),
                       nn.Conv3d(16, 8, (3, 1, 1), padding=(1, 0, 0))), (2, 3, 8, 32, 32), True),
    ]
    for name, net, shape, train in nets:
        net, x = net.to(lazyxla.device()), torch.randn(shape).to(lazyxla.device())
        opt = torch.optim.SGD(net.parameters(), lr=0.01)

        def step(net=net, x=x, opt=opt, train=train):
            if train:
                y = net(x).square().mean()
                y.backward()
                opt.step()
                opt.zero_grad()
            else:
                with torch.no_grad():
                    y = net(x)  # (kept while syncing: an unread result computes nothing)
            lazyxla.sync()
            lazyxla.wait()
            return y
        yield name, step


def _program_section(seconds) -> list:
    from benchmarks.opt_level import _captured_programs, captured_programs
    (spec, inputs), = _captured_programs("cnn:train", 0)
    p = programs_compared(spec, inputs, seconds, ("one", "forms", "lazyxla"))
    print("ResNet training step program: " + " -> ".join(f"{p[f][0]:.1f}" for f in FORMS) + " ms", flush=True)
    lines = ["", "ResNet training step (the suite's `cnn` workload, batch 32), its one program "
             "compiled each way, runs alternating (median):", "",
             "| form | run ms | XLA compile s |", "|---|---:|---:|"]
    for form, label in (("one", "one convolution per weight gradient, channels-first"),
                        ("forms", "conv_grad.py's weight gradients, channels-first"),
                        ("lazyxla", "lazyxla: conv_grad.py, channels-last (channels_last.py)")):
        lines.append(f"| {label} | {p[form][0]:.1f} | {p[form][1]:.2f} |")
    lines += ["", f"Run time ratios: conv_grad.py {p['forms'][0] / p['one'][0]:.2f}, then channels-last "
              f"{p['lazyxla'][0] / p['forms'][0]:.2f}; the outputs (loss, parameters, optimizer state) "
              f"differ by up to {p['max_diff']:.1e}.", "",
              "Small networks' lazy-mode steps (each one program, SGD), channels-last off and on:", "",
              "| network | channels-first ms | channels-last ms | ratio | XLA compile s (first, last) |",
              "|---|---:|---:|---:|---|"]
    for name, step in _small_programs():
        spec, inputs = max(captured_programs(step), key=lambda si: si[0].n_ops)
        p = programs_compared(spec, inputs, seconds / 4, ("forms", "lazyxla"))
        print(f"{name}: {p['forms'][0]:.2f} -> {p['lazyxla'][0]:.2f} ms", flush=True)
        lines.append(f"| {name} | {p['forms'][0]:.2f} | {p['lazyxla'][0]:.2f} | "
                     f"{p['lazyxla'][0] / p['forms'][0]:.2f} | {p['forms'][1]:.2f}, {p['lazyxla'][1]:.2f} |")
    return lines


def _weight_grad_section(layers) -> list:
    import jax
    from lazyxla.lowering import conv_grad
    lines = ["| batch | channels | image | kernel, stride | dtype | form | eager ms | one convolution ms "
             "| lazyxla ms | one / lazyxla | lazyxla / eager | error: eager | one conv. | lazyxla |",
             "|---:|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, cin, cout, side, k, stride, dtype in layers:
        r = layer(n, cin, cout, side, k, stride, dtype)
        out = (side + 2 * (k // 2) - k) // stride + 1
        m = conv_grad.batch_chunk(*(jax.ShapeDtypeStruct(shape, dtype) for shape in (
            (n, cin, side, side), (cout, cin, k, k), (n, cout, out, out))), False)
        form = "matrix product" if k == 1 else f"{-(-n // m)} chunks of {m}" if m < n else "one convolution"
        print(f"{n} {cin}->{cout} {side} k{k} s{stride} {dtype}: eager {r['eager_ms']:.2f} one "
              f"{r['one_ms']:.2f} lazyxla {r['forms_ms']:.2f} ({form})", flush=True)
        lines.append(f"| {n} | {cin}->{cout} | {side}x{side} | {k}x{k}, {stride} | {dtype} | {form} | "
                     f"{r['eager_ms']:.2f} | {r['one_ms']:.2f} | {r['forms_ms']:.2f} | "
                     f"{r['one_ms'] / r['forms_ms']:.2f} | {r['forms_ms'] / r['eager_ms']:.2f} | "
                     f"{r['eager_err']:.0e} | {r['one_err']:.0e} | {r['forms_err']:.0e} |")
    return lines


def _section_3d(layers) -> list:
    lines = ["", "3-d convolutions (float32): the forward, and the three gradients (input, weight, bias) "
             "of `convolution_backward`; XLA 3-d = one 3-d convolution (`lowering/conv3d.py` "
             "off), lazyxla = sums of 2-d convolutions over the depth taps (transposed: their "
             "transpose); padding kernel // 2, a transposed one's output padding stride - 1; "
             "error: the forward's largest difference from eager's, relative to its largest value.", "",
             "| batch | channels | size | kernel, stride | eager fwd ms | XLA 3-d fwd | lazyxla fwd | "
             "eager bwd ms | XLA 3-d bwd | lazyxla bwd | XLA 3-d / lazyxla (fwd, bwd) | error |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for n, cin, cout, size, k, stride, transposed in layers:
        r = layer_3d(n, cin, cout, size, k, stride, transposed)
        kk = "x".join(map(str, (k,) * 3 if isinstance(k, int) else k)) + (" transposed" if transposed else "")
        print(f"3-d {n} {cin}->{cout} {size} k{kk} s{stride}: fwd eager {r['eager_fwd_ms']:.1f} xla "
              f"{r['xla_fwd_ms']:.1f} lazyxla {r['taps_fwd_ms']:.1f}; bwd eager {r['eager_bwd_ms']:.1f} "
              f"xla {r['xla_bwd_ms']:.1f} lazyxla {r['taps_bwd_ms']:.1f}", flush=True)
        lines.append(f"| {n} | {cin}->{cout} | {'x'.join(map(str, size))} | {kk}, {stride} | "
                     f"{r['eager_fwd_ms']:.1f} | {r['xla_fwd_ms']:.1f} | {r['taps_fwd_ms']:.1f} | "
                     f"{r['eager_bwd_ms']:.1f} | {r['xla_bwd_ms']:.1f} | {r['taps_bwd_ms']:.1f} | "
                     f"{r['xla_fwd_ms'] / r['taps_fwd_ms']:.1f}, {r['xla_bwd_ms'] / r['taps_bwd_ms']:.1f} | "
                     f"{r['taps_err']:.0e} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 layer shapes, 2 3-d ones, no whole program")
    ap.add_argument("--seconds", type=float, default=20.0, help="timed seconds for the program")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "convolutions.md"))
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        ap.error("--seconds must be above 0")
    from benchmarks.worker import start_xla_runtime, write_report
    start_xla_runtime("lazy", 1)
    import torch
    torch.set_num_threads(1)
    lines = ["# Convolutions on XLA's CPU backend", "",
             f"`python -m benchmarks.convolutions{' --quick' if args.quick else ''}` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}. One process, XLA on one core, torch on one thread. "
             "one convolution = lazyxla's lowering as `jax.vjp` of the forward gives it; lazyxla = "
             "its form now (`lowering/conv_grad.py`: 1x1 kernels as a matrix product, other 2-d "
             "convolutions over chunks of the batch). Weight gradient alone, median of 9 runs; "
             "error: largest difference from eager's float64 result, relative to its largest "
             "value.", ""]
    lines += _weight_grad_section(QUICK if args.quick else LAYERS)
    if not args.quick:
        lines += _program_section(args.seconds)
    lines += _section_3d(QUICK_3D if args.quick else LAYERS_3D)
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

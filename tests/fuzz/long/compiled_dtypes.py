"""torch.compile(backend="lazyxla") against eager on mixed dtypes: random small functions of a
float32 tensor `a` and a tensor `b` of another dtype (bool, uint8, int32, int64, float16,
bfloat16, float64), with type promotion between them and against Python scalars, casts, integer
arithmetic (floor division, remainder, shifts, bitwise ops), comparisons, index results (argmax,
topk, sort), reductions with and without a dtype, and in-place writes that cast into their
target. Each function is called three times on fresh values (with `--dynamic`: on new shapes too,
under dynamic=True; with `--no-grad`: under torch.no_grad()). Compared: errors, and outputs'
dtypes, shapes and values, and the inputs' final values. Where lazyxla differs, the same calls
under backend="aot_eager" decide: a difference aot_eager shows too is PyTorch's (Dynamo's meta
kernels accept dtypes eager's kernels refuse), counted and not reported. Values a cast cannot hold are left out (casts to uint8 clamp first; with a
uint8 `b`, `a` is >= 0): C++ leaves such a float -> int conversion undefined, eager's x86 kernels
wrap (-1.4 -> 255) where XLA saturates (-> 0), as PyTorch's own newer scalar casts do. topk's
indices are of values without ties (eager's order among ties is unspecified)."""
import logging
import random
import sys

import torch
import torch._dynamo

import lazyxla
from _driver import close, define, main, outcome

D = lazyxla.device()
DYNAMIC = "--dynamic" in sys.argv
NO_GRAD = "--no-grad" in sys.argv
FLAGS = ("--dynamic", "--no-grad")
torch._dynamo.config.cache_size_limit = 1000
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float64]

STATEMENTS = [
    "t{n} = {x} + {y}", "t{n} = {x} * {y}", "t{n} = {x} - {y}", "t{n} = {x} / ({y}.abs() + 1)",
    "t{n} = {x} // 2", "t{n} = {x} % 3", "t{n} = {x} + 1", "t{n} = {x} * 2.5", "t{n} = {x} + True",
    "t{n} = {x} > {y}", "t{n} = {x} == {y}", "t{n} = ({x} > 0) & ({y} < 1)", "t{n} = ~({x} > 0)",
    "t{n} = {x}.to(torch.int64) << 1", "t{n} = {x}.to(torch.int32) ^ 5", "t{n} = {x}.clamp(0, 200).to(torch.uint8) | 3",
    "t{n} = {x}.float()", "t{n} = {x}.half() * {y}", "t{n} = {x}.to(torch.bfloat16) + {y}",
    "t{n} = {x}.to(torch.float64).sum(0)", "t{n} = {x}.long()", "t{n} = {x}.bool()",
    "t{n} = {x}.abs().to({y}.dtype)", "t{n} = {x}.sum()", "t{n} = {x}.sum(0, dtype=torch.float32)",
    "t{n} = {x}.prod(-1)", "t{n} = {x}.cumsum(0)", "t{n} = {x}.argmax(-1)", "t{n} = {x}.argmin()",
    "t{n} = ({x}.float() + torch.arange({x}.shape[-1], device={x}.device) / 64).topk(2, -1).indices", "t{n} = {x}.float().sort(-1).values",
    "t{n} = {x}.max(0).indices", "t{n} = {x}.amax(-1)", "t{n} = {x}.float().mean(0)",
    "t{n} = torch.where({x} > 0, {x}, {y})", "t{n} = torch.where({x} > 1, {x}, 0)",
    "t{n} = {x}.clamp(0, 2)", "t{n} = {x}.abs()", "t{n} = -{x}.float()", "t{n} = {x}.float().exp()",
    "t{n} = torch.maximum({x}, {y})", "t{n} = {x}.float() @ {y}.float().t()",
    "t{n} = torch.cat([{x}, {y}], 0)", "t{n} = torch.stack([{x}.float(), {y}.float()])",
    "t{n} = {x}.masked_fill({y} > 0, 7)",
    "t{n} = {x}.flip(0)", "t{n} = {x}.t()", "t{n} = {x}[1:]", "t{n} = {x}.new_ones(2) * {x}.sum()",
    "t{n} = torch.zeros_like({x}) + {y}", "t{n} = torch.full_like({x}, 3)", "t{n} = {x}.sign()",
    "t{n} = {x}.count_nonzero()", "t{n} = {x}.all(-1)", "t{n} = {x}.any()", "t{n} = {x}.float().round()",
    "t{n} = torch.div({x}, 2, rounding_mode='floor')", "t{n} = torch.div({x}, 3, rounding_mode='trunc')",
    "t{n} = {x}.pow(2)", "t{n} = {x}.float().pow({y})", "t{n} = {x}.float().var(0)",
    "t{n} = {x}.float().softmax(-1, dtype=torch.float64)", "t{n} = {x}.to(torch.int64).bitwise_not()",
    "{inp}.add_({y})", "{inp}.mul_(2)", "{inp}.copy_({y})", "{inp}[0] = {y}[0]", "{inp}.fill_(1)",
    "{inp}.clamp_(0, 1)", "{inp}.masked_fill_({y} > 0, 0)", "{inp}[{x} > 0] = 1",
    "{inp}.sub_(1)", "{inp}.div_(2)", "{inp}.floor_divide_(2)",
]


def _function(r):
    lines, names = [], ["a", "b"]
    for n in range(r.randint(1, 6)):
        line = r.choice(STATEMENTS).format(n=n, x=r.choice(names), y=r.choice(names),
                                           inp=r.choice(["a", "b"]))
        lines.append(line)
        if line.startswith(f"t{n} "):
            names.append(f"t{n}")
    returned = names[2:] + r.sample(["a", "b"], r.randint(0 if len(names) > 2 else 1, 2))
    return "def f(a, b):\n" + "".join(f"    {s}\n" for s in lines) + f"    return ({', '.join(returned)},)\n"


def _make(shape, dtype, g):
    if dtype == torch.bool:
        return torch.randn(shape, generator=g) > 0
    if not dtype.is_floating_point:
        return torch.randint(0 if dtype == torch.uint8 else -4, 5, shape, generator=g).to(dtype)
    return (torch.randn(shape, generator=g) * 2).to(dtype)


def _same(want, got):
    if want[0] == got[0] == "error" and got[1] == "TorchRuntimeError":
        return True  # Dynamo wraps eager's error, for every backend
    if want[0] != got[0] or want[0] == "error":
        return want[:2] == got[:2]
    for x, y in zip(want[1], got[1]):
        if x.dtype in (torch.float16, torch.bfloat16):
            same = x.dtype == y.dtype and close(x.float(), y.float(), rtol=2e-2, atol=2e-2)
        else:
            same = close(x, y, rtol=1e-4)
        if not same:
            return False
    return True


def run(seed):
    r = random.Random(seed)
    source = _function(r)
    f = define(source)
    dtype = r.choice(DTYPES)
    compiled = torch.compile(f, backend="lazyxla", dynamic=True if DYNAMIC else None)
    rows, cols = r.randint(2, 3), r.randint(2, 3)
    try:
        for call in range(3):
            if DYNAMIC and call:
                rows, cols = r.randint(2, 5), r.randint(2, 5)
            g = torch.Generator().manual_seed(seed * 10 + call)
            a0, b0 = _make((rows, cols), torch.float32, g), _make((rows, cols), dtype, g)
            if dtype == torch.uint8:  # (see the docstring: a float written into uint8 is >= 0)
                a0 = a0.abs()

            def program(fn, dev, a0=a0, b0=b0):
                a, b = a0.clone().to(dev), b0.clone().to(dev)
                with torch.set_grad_enabled(not NO_GRAD):
                    outs = fn(a, b)
                return [o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in outs] + [a.cpu(), b.cpu()]
            want, got = outcome(lambda: program(f, "cpu")), outcome(lambda: program(compiled, D))
            if not _same(want, got):
                torch._dynamo.reset()
                reference = torch.compile(f, backend="aot_eager", dynamic=True if DYNAMIC else None)
                if _same(outcome(lambda: program(reference, "cpu")), got):
                    return None  # PyTorch's own difference
                return (source, dtype, call, want, got)
        return None
    finally:
        torch._dynamo.reset()


if __name__ == "__main__":
    raise SystemExit(main(run, [a for a in sys.argv[1:] if a not in FLAGS]))

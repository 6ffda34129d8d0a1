"""torch.compile(backend="lazyxla") against eager: random small functions (arithmetic, in-place
writes to the inputs and through views of them, returned views of inputs and of results,
reductions, matmuls, a graph break on .item(), control flow on shapes), each called four times on
fresh values (with `--dynamic`: on new shapes too, under dynamic=True; with `--no-grad`: under
torch.no_grad(), which hands the bridge Dynamo's own graph instead of aot_autograd's; with
`--ints`: with an int argument `k`, new on each call, used as a scalar, in Python arithmetic, as a
bound and as a shift; with `--shift`: with `a` and `b` views of larger tensors, starting at row 0,
1, 2, 3 on the four calls, so that the programs read and write their inputs at starts they are
fed), masked writes among them. Outputs, their strides (of dims longer than one) and storage offsets, and the inputs'
final values compared. Dynamo's TorchRuntimeError wrapping eager's RuntimeError or IndexError of a
bad program counts as the same error (it does so for every backend, `backend="eager"` too)."""
import random
import sys

import torch
import torch._dynamo

import lazyxla
from _driver import close, define, main, outcome

D = lazyxla.device()
DYNAMIC = "--dynamic" in sys.argv
NEW_SHAPES = "--new-shapes" in sys.argv
NO_GRAD = "--no-grad" in sys.argv
INTS = "--ints" in sys.argv
SHIFT = "--shift" in sys.argv
FLAGS = ("--dynamic", "--no-grad", "--ints", "--shift", "--new-shapes")
torch._dynamo.config.cache_size_limit = 1000

STATEMENTS = [
    "t{n} = {x} + {y}", "t{n} = {x} * 2.5 - {y}", "t{n} = torch.relu({x})",
    "t{n} = {x}.sum(0, keepdim=True) + {y}", "t{n} = torch.where({x} > 0, {x}, {y})",
    "t{n} = {x}.exp().clamp(max=5)", "t{n} = {x}.softmax(-1)", "t{n} = {x}.t().contiguous().t()",
    "t{n} = {x}[0:1] * 3", "t{n} = {x}.abs().sqrt()", "{inp}.add_({y})", "{inp}.mul_(0.5)",
    "{inp}[0].fill_(1.5)", "{inp}.t()[0].zero_()", "t{n} = {inp}[:, 0:1]", "t{n} = {inp}.view(-1)[:2]",
    "{inp}.copy_({y})", "t{n} = {x}.mean() * {y}", "t{n} = {x}.amax(-1, keepdim=True) - {y}",
    "t{n} = torch.cat([{x}, {y}], 0)[:{rows}]", "t{n} = {x}.max(-1, keepdim=True).values + {y}",
    "t{n} = {x} @ {y}.t() @ {y}", "t{n} = ({x} > 0).float() * {y}", "t{n} = {x} + float({y}.sum())",
    "t{n} = {x} * {inp}.shape[0]", "t{n} = {x}.cumsum(0)", "t{n} = torch.flip({x}, [0])",
    "t{n} = {x}.to(torch.float64).to(torch.float32)", "t{n} = {x}.clone(); t{n}[0, 0] = 7.0",
    "t{n} = {x}.index_select(0, torch.tensor([0], device={x}.device)) + {y}",
    "t{n} = {x}.new_zeros({x}.shape) + {y}", "t{n} = torch.sin({x}) if {x}.shape[0] > 1 else {y}",
    "{inp}[{x} > 0] = 0.5", "{inp}[{x}[:, 0] > 0, 0] = 2.0",
    "t{n} = {x}.clone(); t{n}[{y}[:, 0] > 0, torch.tensor([0, 1], device={x}.device)] = 1.0",
    "t{n} = {x}[1:]", "t{n} = {x}[:, 1:]", "t{n} = {x}.t()[-1]", "t{n} = ({x} * 2)[:, 1:]",
    "t{n} = ({x} + {y}).t()[-1]", "t{n} = {x}.exp()[None].expand(2, -1, -1)",
]

# With --ints: statements on the int argument k (fed to the program where it is only a scalar or
# a view's start, dynamo/fed_starts.py)
INT_STATEMENTS = [
    "t{n} = {x} * k", "t{n} = {x} + (k + 1) * 0.5", "t{n} = {x} - k * {y}", "{inp}.add_(k)",
    "t{n} = {x}.clamp(max=k)", "t{n} = torch.full_like({x}, k) + {y}", "t{n} = {x}[:k]",
    "t{n} = {x}.roll(k, 0)", "t{n} = {x} / (k * k + 1)", "t{n} = {x}.sum() * k - k",
    "t{n} = {x} * (k // 2)", "t{n} = {x}.pow(k % 3)", "{inp}.mul_(k - 1)",
    "t{n} = {x}[k] * 2", "t{n} = {x}[k:k + 2] + 1", "t{n} = {x}.narrow(0, k, 1) - {y}[:1]",
    "{inp}[k] = 1.5", "{inp}[k:k + 1].mul_(2)", "t{n} = {x}[k::2].sum(0)", "t{n} = {x}[:, k] * k",
    "t{n} = {x}[:, k:]", "t{n} = ({x} - 1)[k:]", "t{n} = {x}[:, :k]",
]


def _function(r):
    lines, names = [], ["a", "b"]
    pool = STATEMENTS + INT_STATEMENTS * 2 if INTS else STATEMENTS
    for n in range(r.randint(1, 6)):
        line = r.choice(pool).format(n=n, x=r.choice(names), y=r.choice(names),
                                           inp=r.choice(["a", "b"]), rows=r.randint(1, 3))
        lines.append(line)
        if line.startswith(f"t{n} "):
            names.append(f"t{n}")
    # every result is returned: Dynamo drops dead code, and a dead statement that raises in eager
    # would not raise compiled (under any backend)
    returned = names[2:] + r.sample(["a", "b"], r.randint(0 if len(names) > 2 else 1, 2))
    return f"def f(a, b{', k' if INTS else ''}):\n" + "".join(f"    {s}\n" for s in lines) + f"    return ({', '.join(returned)},)\n"


def _layout(t):  # strides of dims of one element are arbitrary; an empty tensor's and its offset too
    if not t.numel():
        return tuple(t.shape), t.dtype
    return tuple(t.shape), tuple(s for s, n in zip(t.stride(), t.shape) if n > 1), t.dtype, t.storage_offset()


def run(seed):
    r = random.Random(seed)
    source = _function(r)
    f = define(source)
    compiled = torch.compile(f, backend="lazyxla", dynamic=True if DYNAMIC else None)
    rows, cols = r.randint(2, 3), r.randint(2, 3)
    try:
        for call in range(4):
            if (DYNAMIC or NEW_SHAPES) and call:
                rows, cols = r.randint(2, 5), r.randint(2, 5)
            g = torch.Generator().manual_seed(seed * 10 + call)
            extra = 3 if SHIFT else 0  # (rows around the inputs, which start at row `call`)
            a0, b0 = (torch.randn(rows + extra, cols, generator=g) for _ in range(2))
            k = (r.randint(-4, 6),) if INTS else ()

            def program(fn, dev, call=call, rows=rows, a0=a0, b0=b0, k=k):
                big_a, big_b = a0.clone().to(dev), b0.clone().to(dev)
                a, b = (big_a[call:call + rows], big_b[call:call + rows]) if SHIFT else (big_a, big_b)
                with torch.set_grad_enabled(not NO_GRAD):
                    outs = fn(a, b, *k)
                return ([o.detach().cpu() for o in outs] + [big_a.cpu(), big_b.cpu()],
                        [_layout(o) for o in outs])
            want, got = outcome(lambda: program(f, "cpu")), outcome(lambda: program(compiled, D))
            if want[0] == got[0] == "error" and got[1] == "TorchRuntimeError" and \
                    want[1] in ("RuntimeError", "IndexError"):
                return None
            if want[0] != got[0] or want[0] == "error":
                return None if want[:2] == got[:2] else (source, call, want, got)
            (values_want, layouts_want), (values_got, layouts_got) = want[1], got[1]
            if not all(close(x, y, rtol=1e-4) for x, y in zip(values_want, values_got)):
                return (source, call, "values", values_want, values_got)
            if layouts_want != layouts_got:
                return (source, call, "layouts", layouts_want, layouts_got)
        return None
    finally:
        torch._dynamo.reset()


if __name__ == "__main__":
    raise SystemExit(main(run, [a for a in sys.argv[1:] if a not in FLAGS]))

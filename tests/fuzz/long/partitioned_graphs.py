"""torch.compile(backend="lazyxla") against eager on graphs the bridge splits around CPU ops: random
functions that update state in place (an object's tensors, which reach the graph as inputs;
torch.optim's state reaches it as attributes, which tests/dynamo cover), through the aliases in-place ops return, read it
back, and run CPU work between (a custom op with only a CPU kernel; `count += 1` on a 0-dim CPU
tensor, as an optimizer's step count), under no_grad. Each function is called three times (five with `--float`);
returned values and the final state compared. With `--float`, the function also takes a Python
float that changes every call (a learning rate), which Dynamo passes as a 0-dim tensor read with
`.item()`."""
import random
import sys

import torch
import torch._dynamo

import lazyxla
from _driver import close, define, main, outcome

D = lazyxla.device()
FLOAT = "--float" in sys.argv
torch._dynamo.config.cache_size_limit = 1000


@torch.library.custom_op("lazyxla_fuzz::cpu_affine", mutates_args=(), device_types="cpu")
def cpu_affine(x: torch.Tensor) -> torch.Tensor:
    """CPU work between partitions: no XLA lowering."""
    return x * 0.5 + 1


@cpu_affine.register_fake
def _(x):
    return torch.empty_like(x)


class State:
    """Tensors held by an object, as torch.optim holds its state."""
    def __init__(self, tensors, count):
        self.s, self.count = tensors, count


STATEMENTS = [
    "st.s[{i}].mul_({k})", "st.s[{i}].add_({v}, alpha={k})", "st.s[{i}].lerp_({v}, 0.25)",
    "st.s[{i}].addcmul_({v}, {w}, value=0.5)", "st.s[{i}].copy_({v})",
    "a{n} = st.s[{i}].mul_({k}); a{n}.add_({v})", "a{n} = st.s[{i}].mul_({k}); a{n}.addcdiv_({v}, {w}.abs() + 1)",
    "x.add_(st.s[{i}], alpha={k})", "x.addcdiv_(st.s[{i}], st.s[{j}].abs() + 1, value=-{k})",
    "v{n} = st.s[{i}] * 2 + {v}", "v{n} = ({v} - {w}).abs().sqrt() + {k}", "v{n} = st.s[{i}].clone()",
    "v{n} = torch.ops.lazyxla_fuzz.cpu_affine({v})", "st.count += 1",
    "v{n} = {v} * {k}",
]
SCALES = ["0.9", "-0.5", "2.0", "lr", "1 - lr", "lr * 0.1"] if FLOAT else ["0.9", "-0.5", "2.0"]


def _function(r):
    lines, values = [], ["x", "st.s[0]", "st.s[1]", "st.s[2]"]
    for n in range(r.randint(2, 8)):
        i, j = r.randrange(3), r.randrange(3)
        line = r.choice(STATEMENTS).format(n=n, i=i, j=j, v=r.choice(values), w=r.choice(values),
                                           k=r.choice(SCALES))
        lines.append(line)
        if line.startswith(f"v{n} "):
            values.append(f"v{n}")
    if not any("cpu_affine" in s or "count" in s for s in lines):
        lines.insert(r.randrange(len(lines) + 1), "st.count += 1")
    returned = [v for v in values if v.startswith("v")] or ["x"]
    args = "x, st, lr" if FLOAT else "x, st"
    return f"def f({args}):\n" + "".join(f"    {s}\n" for s in lines) + f"    return ({', '.join(returned)},)\n"


def run(seed):
    r = random.Random(seed)
    source = _function(r)
    f = define(source)
    compiled = torch.compile(f, backend="lazyxla")
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(3, generator=g)
    s0 = [torch.randn(3, generator=g) for _ in range(3)]

    def program(fn, dev):
        x = x0.clone().to(dev)
        st = State([t.clone().to(dev) for t in s0], torch.tensor(0.0))
        outs = []
        with torch.no_grad():
            for call in range(5 if FLOAT else 3):
                lr = 0.01 * (call + 1) + 0.003 * seed % 7
                outs.append([o.cpu().clone() for o in (fn(x, st, lr) if FLOAT else fn(x, st))])  # (clone: on the CPU, .cpu() is the tensor itself)
        return outs, [x.cpu()] + [t.cpu() for t in st.s] + [st.count.clone()]
    try:
        want, got = outcome(lambda: program(f, "cpu")), outcome(lambda: program(compiled, D))
        if want[0] != got[0] or want[0] == "error":
            return None if want[:2] == got[:2] or (want[1], got[1]) == ("RuntimeError", "TorchRuntimeError") \
                else (source, want, got)
        (outs_w, state_w), (outs_g, state_g) = want[1], got[1]
        for call, (ow, og) in enumerate(zip(outs_w, outs_g)):
            if not all(close(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(ow, og)):
                return (source, "call", call, ow, og)
        if not all(close(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(state_w, state_g)):
            return (source, "state", state_w, state_g)
        return None
    finally:
        torch._dynamo.reset()


if __name__ == "__main__":
    raise SystemExit(main(run, [a for a in sys.argv[1:] if a != "--float"]))

"""Gradients against eager: random chains of differentiable ops (reductions, matmuls, norms,
softmax, sort/gather, in-place updates of non-leaf tensors, setitem, expand, products and
whole-tensor max/min/median with exact zeros and ties, masked writes of values that need a
gradient), then backward of a
weighted sum; the output and both inputs' gradients compared. In lazy mode, or with `--compile`
under torch.compile(backend="lazyxla") (AOT autograd's forward and backward programs)."""
import random
import sys

import torch
import torch._dynamo
import torch.nn.functional as F

import lazyxla
from _driver import close, main, outcome

D = lazyxla.device()
COMPILE = "--compile" in sys.argv

OPS = [
    "t{n} = {x} * {y}", "t{n} = {x} / ({y}.abs() + 1)", "t{n} = torch.tanh({x})",
    "t{n} = {x}.sigmoid() * {y}", "t{n} = {x}.softmax(-1)", "t{n} = {x}.log_softmax(0)",
    "t{n} = {x}.sum(-1, keepdim=True) * {y}", "t{n} = {x}.amax(0, keepdim=True) + {y}",
    "t{n} = {x}.t() @ {y}", "t{n} = {x}.norm(dim=-1, keepdim=True) + {y}",
    "t{n} = {x}[:, :1].expand_as({y}) * {y}", "t{n} = torch.where({x} > 0, {x}, {y} * 2)",
    "t{n} = {x}.clamp(-0.5, 0.5)", "t{n} = F.gelu({x})", "t{n} = F.layer_norm({x}, {x}.shape[-1:])",
    "t{n} = {x}.cumsum(-1)", "t{n} = {x}.pow(2) + {y}.exp()", "t{n} = torch.cat([{x}, {y}], -1)[:, ::2]",
    "t{n} = {x}.flip(0) - {y}", "t{n} = {x}.var(0, keepdim=True) + {y}",
    "t{n} = {x}.max(-1, keepdim=True).values * {y}", "t{n} = {x}.clone(); t{n}[0] = {y}[1]",
    "t{n} = {x} * 1; t{n}.mul_({y}); t{n}.add_(1)", "t{n} = {x}.view(-1).view({x}.shape) * {y}",
    "t{n} = ({x}.abs() + 1e-3).sqrt()", "t{n} = torch.atan2({x}, {y} + 2)",
    "t{n} = F.silu({x}) + F.softplus({y})", "t{n} = {x}.mean() * {y}",
    "t{n} = torch.logsumexp({x}, -1, keepdim=True) - {y}", "t{n} = {x}.sort(-1).values * {y}",
    "t{n} = {x}.gather(-1, {x}.argsort(-1)) * {y}", "t{n} = F.mse_loss({x}, {y}) * {x}",
    "t{n} = {x}.masked_fill({y} > 0.5, 0.0)", "t{n} = {x}.diagonal().unsqueeze(-1) * {y}",
    # products and selections, with exact zeros (their gradients have lazyxla's own formulas)
    "t{n} = ({x} * ({y} > 0)).prod(-1, keepdim=True) * {y}", "t{n} = ({x} * ({y} > 0)).cumprod(0)",
    "t{n} = {x}.cumprod(-1) + {y}", "t{n} = {x}.prod() * {y}", "t{n} = {x}.max() * {y}",
    "t{n} = {x}.min() + {y}", "t{n} = {x}.median() * {y}",
    "t{n} = {x}.masked_scatter({y} > 0, {y} * 3)", "t{n} = {x} * 1; t{n}[{y} > 0] = {y}[0, 0]",
    "t{n} = {x}.clone(); t{n}[{y}[:, 0] > 0] = {y}[1]", "t{n} = {x}.masked_fill({y} > 0, {y}.sum())",
    "t{n} = {x}.index_fill(0, torch.tensor([0, 1], device={x}.device), {y}.mean())",
]


def run(seed):
    r = random.Random(seed)
    lines, names = [], ["a", "b"]
    for n in range(r.randint(2, 6)):
        lines.append(r.choice(OPS).format(n=n, x=r.choice(names), y=r.choice(names)))
        names.append(f"t{n}")
    source = "def f(a, b):\n" + "".join(f"    {s}\n" for s in lines) + f"    return {names[-1]}\n"
    scope = {"torch": torch, "F": F}
    exec(source, scope)
    size = r.randint(2, 4)
    g = torch.Generator().manual_seed(seed)
    a0, b0 = torch.randn(size, size, generator=g), torch.randn(size, size, generator=g)

    compiled = torch.compile(scope["f"], backend="lazyxla") if COMPILE else scope["f"]

    def program(dev):
        a, b = (t.clone().to(dev).requires_grad_(True) for t in (a0, b0))
        out = (scope["f"] if dev == "cpu" else compiled)(a, b)
        weights = torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(dev)
        (out * weights).sum().backward()
        return [out.detach().cpu()] + [t.grad.cpu() if t.grad is not None else None for t in (a, b)]
    want, got = outcome(lambda: program("cpu")), outcome(lambda: program(D))
    torch._dynamo.reset()
    if want[0] == got[0] == "error" and (want[1], got[1]) == ("RuntimeError", "TorchRuntimeError"):
        return None  # Dynamo wraps an error of the traced program (any backend)
    if want[0] != got[0] or want[0] == "error":
        return None if want[:2] == got[:2] else (source, want, got)
    for x, y, what in zip(want[1], got[1], ("output", "grad of a", "grad of b")):
        if (x is None) != (y is None) or x is not None and not close(x, y, rtol=1e-4, atol=1e-4):
            return (source, what, x, y)
    return None


if __name__ == "__main__":
    raise SystemExit(main(run, [a for a in sys.argv[1:] if a != "--compile"]))

"""Every _foreach overload lazyxla lowers, against eager's CPU kernels: lists of 9 dtypes (shapes
(2, 3), () and (0,)), Scalar and Scalar[] arguments of each Python number type, functional and in
place. A sweep, not a random fuzz: SEED numbers the cases (`python foreach_ops.py 0 2000`; past
the last case a seed compares nothing). Compared: errors (type and message), result dtypes and
values."""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _driver import close, main, outcome  # noqa: E402

import lazyxla  # noqa: E402
from lazyxla.lowering.registry import LOWERINGS  # noqa: E402
from lazyxla.testing import sample  # noqa: E402

D = lazyxla.device()
aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int8,
          torch.uint8, torch.bool, torch.complex64]
SHAPES = [(2, 3), (), (0,)]
SCALARS = [2, -1.5, True, 0, 1 + 1j]
ADDC = ("_foreach_addcmul", "_foreach_addcdiv")


def _list(dtype, seed):
    return [sample(shape, dtype, torch.Generator().manual_seed(seed * 10 + k))
            for k, shape in enumerate(SHAPES)]


def _argument_makers(name, overloads):
    """(label, fn(xs, ys, zs) -> the call's arguments) for each way to call the op."""
    out = []
    if "default" in overloads and len(getattr(aten, name).default._schema.arguments) == 1:
        out.append(("unary", lambda L, M, N: (L,)))
    if "List" in overloads and name not in ADDC:
        out.append(("list", (lambda L, M, N: (L, M, N)) if name == "_foreach_lerp" else
                    (lambda L, M, N: (L, M))))
    for s in SCALARS:
        if "Scalar" in overloads:
            if name in ADDC:
                out.append((f"scalar {s!r}", lambda L, M, N, s=s: (L, M, N, s)))
            elif name == "_foreach_lerp":
                out.append((f"scalar {s!r}", lambda L, M, N, s=s: (L, M, s)))
            else:
                out.append((f"scalar {s!r}", lambda L, M, N, s=s: (L, s)))
        if "ScalarList" in overloads:  # each tensor its own scalar
            ss = lambda L, s: [s if i % 2 == 0 else 3 for i in range(len(L))]  # noqa: E731
            if name in ADDC:
                out.append((f"scalars {s!r}", lambda L, M, N, s=s: (L, M, N, ss(L, s))))
            elif name == "_foreach_lerp":
                out.append((f"scalars {s!r}", lambda L, M, N, s=s: (L, M, ss(L, s))))
            else:
                out.append((f"scalars {s!r}", lambda L, M, N, s=s: (L, ss(L, s))))
    if name == "_foreach_pow" and "ScalarAndTensor" in overloads:
        out.append(("scalar base", lambda L, M, N: (2.0, L)))
    return out


def _cases():
    names = sorted({op.__name__.split(".")[0].rstrip("_") for op in LOWERINGS
                    if isinstance(op, torch._ops.OpOverload) and op.__name__.startswith("_foreach")})
    cases = []
    for name in names:
        if name == "_foreach_copy":
            continue  # (no list of results to compare: it writes its first list)
        for label, make in _argument_makers(name, getattr(aten, name).overloads()):
            for dtype in DTYPES:
                for inplace in (False, True):
                    if inplace and label == "scalar base":
                        continue
                    cases.append((name, label, make, dtype, inplace))
    return cases


CASES = _cases()


def _call(name, make, dtype, inplace, device):
    fn = getattr(torch, name + ("_" if inplace else ""))
    args = make(*[[t.to(device) for t in _list(dtype, s)] for s in (0, 1, 2)])
    out = fn(*args)
    return [t.cpu() for t in (args[0] if inplace else out)]


def _same(want, got) -> bool:
    if want[0] != got[0]:
        return False
    if want[0] == "error":
        return want[1:] == got[1:]
    return len(want[1]) == len(got[1]) and all(close(e, a, 1e-2, 1e-2) if e.dtype in (
        torch.float16, torch.bfloat16) else close(e, a) for e, a in zip(want[1], got[1]))


def run(seed):
    if seed >= len(CASES):
        return None
    name, label, make, dtype, inplace = CASES[seed]
    want = outcome(lambda: _call(name, make, dtype, inplace, "cpu"))
    got = outcome(lambda: _call(name, make, dtype, inplace, D))
    if want[0] == "ok" and any(t.dtype is torch.complex32 for t in want[1]):
        return None  # lazyxla has no complex32 (README: limits)
    if _same(want, got):
        return None
    form = "in place" if inplace else "functional"
    return f"{name} {form} {label} {dtype}: eager {str(want)[:200]} lazyxla {str(got)[:200]}"


if __name__ == "__main__":
    raise SystemExit(main(run))

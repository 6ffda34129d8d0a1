"""Chains of views (narrow, slices with steps, select, transpose, permute, diagonal, view,
unfold, squeeze, ...) and in-place writes through them (arithmetic, fill, copy_, masked_fill_,
setitem, index_put_). After each program every tensor made, base and views, is compared with
eager's: values, shape, strides, storage offset, contiguity. Writes through unfold views are
skipped: their elements overlap, and eager's result then depends on its loop order.

`--shift`: each program runs 4 times, its base a slice (even seeds) or a select (odd seeds) of a
larger tensor at starts 0..3, each run its own graph: the graphs differ only in that start, so
from the second on lazyxla runs them as one program fed the start (ir/graph.py)."""
import random
import sys

import torch

import lazyxla
from _driver import close, main, outcome

D = lazyxla.device()


def _views(r, t):
    out = []
    n = t.dim()
    if n >= 1:
        d = r.randrange(n)
        s = t.shape[d]
        if s >= 1:
            a = r.randrange(s)
            b = r.randrange(a, s) + 1
            step = r.choice([1, 2, 3])
            out += [(f"narrow({d},{a},{b - a})", lambda x: x.narrow(d, a, b - a)),
                    (f"slice({d},{a}::{step})", lambda x: x[(slice(None),) * d + (slice(a, None, step),)]),
                    (f"select({d},{a})", lambda x: x.select(d, a))]
        out += [(f"unsqueeze({d})", lambda x: x.unsqueeze(d)),
                ("transpose(0,-1)", lambda x: x.transpose(0, -1))]
    if n >= 2:
        d0, d1 = r.sample(range(n), 2)
        perm = list(range(n))
        r.shuffle(perm)
        out += [(f"transpose({d0},{d1})", lambda x: x.transpose(d0, d1)),
                (f"diagonal({d0},{d1})", lambda x: x.diagonal(0, d0, d1)),
                (f"permute{perm}", lambda x: x.permute(perm))]
    if t.is_contiguous() and t.numel():
        out.append(("view(-1)", lambda x: x.view(-1)))
        if t.numel() % 2 == 0:
            out.append(("view(2,-1)", lambda x: x.view(2, -1)))
    if n >= 1 and t.shape[-1] >= 2:
        out.append(("unfold(-1,2,1)", lambda x: x.unfold(-1, 2, 1)))
    return out + [("reshape(-1)", lambda x: x.reshape(-1)), ("squeeze", lambda x: x.squeeze()),
                  ("view_as", lambda x: x.view_as(x)), ("alias", lambda x: x[...])]


def _arange_like(x):
    return torch.arange(x.numel(), dtype=x.dtype, device=x.device).reshape(x.shape)


_WRITES = [("add_(1.5)", lambda x: x.add_(1.5)), ("mul_(-2)", lambda x: x.mul_(-2)),
           ("zero_", lambda x: x.zero_()), ("fill_(3)", lambda x: x.fill_(3.0)),
           ("clamp_(-1,1)", lambda x: x.clamp_(-1, 1)), ("neg_", lambda x: x.neg_()),
           ("copy_(arange)", lambda x: x.copy_(_arange_like(x))),
           ("masked_fill_(>0,7)", lambda x: x.masked_fill_(x > 0, 7.0)),
           ("abs_().sqrt_()", lambda x: x.abs_().sqrt_()),
           ("add_(own clone)", lambda x: x.add_(x.clone() * 0.5)),
           ("copy_(broadcast row)", lambda x: x.copy_(torch.full(x.shape[-1:], 2.5, device=x.device))),
           ("[0]=9", lambda x: x.__setitem__(0, 9.0) if x.dim() else x.fill_(9.0)),
           ("[...,-1]=5", lambda x: x.__setitem__((Ellipsis, -1), 5.0) if x.dim() else x.fill_(5.0)),
           ("index_put_([0])", lambda x: x.index_put_((torch.tensor([0], device=x.device),),
                                                      torch.tensor(-4.0, device=x.device)) if x.dim() else x)]


def _describe(t):
    return (tuple(t.shape), t.dtype, tuple(t.stride()), t.storage_offset(), t.is_contiguous())


def _shape(r):
    return tuple(r.randint(1, 4) for _ in range(r.randint(1, 3)))


def _program(seed, dev, shift=None):
    r = random.Random(seed)
    shape = _shape(r)
    if shift is None:
        base = torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dev)
    else:  # (shift: (the larger tensor, this run's start))
        big, k = shift
        base = big[k] if seed % 2 else big[k:k + shape[0]]
    live, steps = [("base", base)], []
    for _ in range(r.randint(2, 7)):
        name, src = r.choice(live)
        if r.random() < 0.55:
            vname, fn = r.choice(_views(r, src))
            live.append((f"{name}.{vname}", fn(src)))
        elif "unfold" not in name:
            wname, fn = r.choice(_WRITES)
            fn(src)
            steps.append(f"{name}.{wname}")
    return [(n, _describe(t), t.cpu().clone()) for n, t in live], steps


def _shifted(seed, dev):
    shape = _shape(random.Random(seed))  # (the base's, as _program draws it)
    big = torch.randn((shape[0] + 3,) + shape[1:] if seed % 2 == 0 else (4,) + shape,
                      generator=torch.Generator().manual_seed(seed)).to(dev)
    runs = []
    for k in range(4):
        live, steps = _program(seed, dev, (big, k))
        if dev != "cpu":
            lazyxla.sync()
        runs.append((live + [("big", _describe(big), big.cpu().clone())], steps))
    return runs


def run(seed):
    if "--shift" in sys.argv:
        expected, actual = outcome(lambda: _shifted(seed, "cpu")), outcome(lambda: _shifted(seed, D))
        if expected[0] != actual[0] or expected[0] == "error":
            return None if expected[:2] == actual[:2] else (expected, actual)
        for k, (want, got) in enumerate(zip(expected[1], actual[1])):
            diff = _compare(want, got)
            if diff:
                return ("start", k) + diff
        return None
    expected, actual = outcome(lambda: _program(seed, "cpu")), outcome(lambda: _program(seed, D))
    if expected[0] != actual[0] or expected[0] == "error":
        return None if expected[:2] == actual[:2] else (expected, actual)
    return _compare(expected[1], actual[1])


def _compare(expected, actual):
    (want, steps), (got, _) = expected, actual
    for (name, meta_want, value_want), (_, meta_got, value_got) in zip(want, got):
        if meta_want != meta_got:
            return ("layout", steps, name, meta_want, meta_got)
        if not close(value_want, value_got):
            return ("value", steps, name, value_want.tolist(), value_got.tolist())
    return None


if __name__ == "__main__":
    raise SystemExit(main(run, [a for a in sys.argv[1:] if a != "--shift"]))

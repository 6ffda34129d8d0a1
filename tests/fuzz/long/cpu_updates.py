"""Compiled functions that interleave device ops reading 0-dim CPU tensors (`x * s`, as an
optimizer's update reads its step count) with CPU updates of those tensors (`s.add_(k)`,
`s.mul_(t)`, as `step += 1`), against eager. The CPU updates split the graph; the partition moves
each one up past the device ops that do not read what it writes (dynamo/partition.py), so a
wrong move shows as a device result computed with a count from the wrong side of an update.
Compared over 3 calls: every output, and the CPU tensors' values after each call."""
import random
import sys

import torch
import torch._dynamo

import lazyxla
from _driver import close, main

D = lazyxla.device()
torch._dynamo.config.cache_size_limit = 1000
START = (1.5, 0.75, 1.25)


def _program(rng):
    ops = []
    for _ in range(rng.randint(3, 10)):
        k, i, j = rng.random(), rng.randrange(3), rng.randrange(3)
        if k < 0.4:
            ops.append(("scale", i, rng.choice([0.5, 2.0])))
        elif k < 0.55:
            ops.append(("add", i, rng.choice([1.0, -0.5])))
        elif k < 0.7:
            ops.append(("mul", i, j))
        elif k < 0.85:
            ops.append(("out", i, None))
        else:
            ops.append(("diff", i, j))
    return ops


def _function(ops):
    def fn(x, s0, s1, s2):
        s, outs = [s0, s1, s2], []
        for kind, i, a in ops:
            if kind == "scale":
                x = x * s[i] + a
            elif kind == "diff":
                x = x * s[i] - s[a]
            elif kind == "add":
                s[i].add_(a)
            elif kind == "mul":
                s[i].mul_(s[a])
            else:
                outs.append(x * s[i])
        return (x, *outs)
    return fn


def run(seed):
    ops = _program(random.Random(seed))
    fn = _function(ops)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="lazyxla")
    x = torch.arange(1.0, 4.0)
    ref, cpu = [torch.tensor(v) for v in START], [torch.tensor(v) for v in START]
    with torch.no_grad():
        for call in range(3):
            want, got = fn(x, *ref), compiled(x.to(D), *cpu)
            if len(want) != len(got) or not all(close(w, g.cpu()) for w, g in zip(want, got)):
                return (ops, f"call {call}: outputs differ")
            if [c.item() for c in cpu] != [r.item() for r in ref]:
                return (ops, f"call {call}: CPU tensors {[c.item() for c in cpu]}, "
                             f"eager {[r.item() for r in ref]}")
    return None


if __name__ == "__main__":
    raise SystemExit(main(run))

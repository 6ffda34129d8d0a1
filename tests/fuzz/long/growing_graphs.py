"""Lazy mode against eager on loops whose graphs vary in a small part (ir/stages.py). Each random
program mixes a stable part (ops on tensors of fixed shapes: 5x5, 5 and 0-dim) with a growing
part (a history as long as the step says: cats, scans, sorts, factories of its length), which
feeds back into the stable part through reductions, selections and topk/max (nodes of two
outputs). The program runs at 6 lengths in turn, synced at each, so that from the second on
the cut may run it in stages. Compared: every value the program makes, at every length. The
last line says how many programs ran in stages. The ops keep values well conditioned (matmuls
through tanh, square roots of |a - b| + 0.5): a last-bit difference of XLA's sums or tanh from
eager's, through a matrix power or the square root of a difference near 0, is no finding."""
import random

import torch

import lazyxla
from _driver import close, define, host, main, outcome

D = lazyxla.device()
LENGTHS = (6, 7, 8, 9, 10, 11)

STABLE = [  # {m}: a 5x5, {v}: a 5-vector, {s}: a 0-dim, {a}: any of them
    "t{n} = ({a} * 0.9).sin()", "t{n} = torch.tanh({m} @ {m2})", "t{n} = torch.tanh({m} @ {v})", "t{n} = {a}.softmax(-1)",
    "t{n} = {m} + {v}", "t{n} = {a} + {s}", "t{n} = {m}.sum(0)", "t{n} = {a}.amax()",
    "t{n} = {v}.topk(2).values * {s}", "t{n} = (({a} - {a2}).abs() + 0.5).sqrt()", "t{n} = {m}.t() * 0.5",
    "t{n} = torch.tanh({a}) + 1",
]
GROWING = [  # {g}: a growing vector
    "g{n} = torch.cat([{g}, {v}])", "g{n} = torch.cat([{g}, {s}[None]])", "g{n} = {g} * {s}",
    "g{n} = {g}.cumsum(0) * 0.1", "g{n} = ({g} * 0.5).exp()", "g{n} = {g}.sort().values",
    "g{n} = torch.arange({g}.shape[0], device={g}.device) * 0.1 + {g}",
    "g{n} = {g}.flip(0)[1:]",
]
BACK = [  # growing -> stable
    "t{n} = {g}.sum()", "t{n} = {g}.max()", "t{n} = {g}[-1]", "t{n} = {g}[:5]",
    "t{n} = {g}.topk(5).values", "t{n} = {g}.max(0).values", "t{n} = {g}.mean() * {v}",
    "t{n} = {v} * {g}.norm()", "t{n} = {g}.sort().indices[:5].float()",
]


def run(seed):
    rng = random.Random(seed)
    source = _program_with_kinds(rng)
    f = define(source)
    g = torch.Generator().manual_seed(seed)
    m, v = torch.randn(5, 5, generator=g), torch.randn(5, generator=g)
    md, vd = m.to(D), v.to(D)
    staged = lazyxla.metrics.counter_value("StagedSync") or 0
    for length in LENGTHS:
        h = torch.randn(length, generator=g)
        want = outcome(lambda: f(m, v, h))
        got = outcome(lambda: _synced(f(md, vd, h.to(D))))
        if want[0] != got[0] or (want[0] == "error" and want[1] != got[1]):
            return ("outcome", length, want[:2], got[:2], source)
        if want[0] == "ok":
            bad = [k for k in want[1] if not close(want[1][k], host(got[1][k]), rtol=1e-4, atol=1e-5)]
            if bad:
                return ("values", length, bad, source)
    if (lazyxla.metrics.counter_value("StagedSync") or 0) > staged:
        STAGED[0] += 1
    return None


def _synced(out):
    lazyxla.sync()
    return out


STAGED = [0]


def _program_with_kinds(rng):
    """A program whose every statement's operands are of the kinds its template asks for: the
    kind of each stable result is read from a CPU run of the program so far."""
    m, v = torch.zeros(5, 5), torch.zeros(5)
    env = {"m0": m, "v0": v, "g0": torch.zeros(6), "s0": v.sum()}
    lines = ["def f(m0, v0, g0):", "    s0 = v0.sum()"]
    for n in range(1, rng.randint(30, 45)):
        kinds = _kinds(env)
        r = rng.random()
        table = STABLE if r < 0.7 else GROWING if r < 0.85 else BACK
        pick = {"m": rng.choice(kinds["m"]), "m2": rng.choice(kinds["m"]), "v": rng.choice(kinds["v"]),
                "s": rng.choice(kinds["s"]), "g": rng.choice(kinds["g"]), "n": n,
                "a": rng.choice(kinds["m"] + kinds["v"] + kinds["s"]),
                "a2": rng.choice(kinds["m"] + kinds["v"] + kinds["s"])}
        line = rng.choice(table).format(**pick)
        try:
            exec(line, {"torch": torch}, env)
        except RuntimeError:  # (shapes that do not broadcast): drawn again
            continue
        lines.append(f"    {line}")
    lines.append("    return {" + ", ".join(f"'{k}': {k}" for k in env) + "}")
    return "\n".join(lines)


STABLE_KINDS = {(5, 5): "m", (5,): "v", (): "s"}


def _kinds(env):
    """Names by kind: growing vectors (named g*) and the stable 5x5s, 5-vectors and 0-dims."""
    kinds = {"m": [], "v": [], "s": [], "g": []}
    for name, t in env.items():
        kind = "g" if name.startswith("g") else STABLE_KINDS.get(tuple(t.shape))
        if kind:
            kinds[kind].append(name)
    return kinds


if __name__ == "__main__":
    import sys
    code = main(run)
    print(f"{STAGED[0]} programs ran in stages")
    sys.exit(code)

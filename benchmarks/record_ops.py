"""Recording cost per op in lazy mode, against the budget of 10 us per recorded op.

Each call is made `per_round` times in a row (a training step's worth of pending work), then
synced untimed; its time is a round's time divided by `per_round`, median over rounds. The rounds
of all calls alternate, so that a slow phase of a shared machine hits every call alike. The budget
applies per aten op recorded: a call's time divided by the ops it records (F.linear records a
transpose view and an addmm). Beside it: the same call in eager PyTorch on the CPU, on the same
tensors (there it also computes).
Run alone: `python -m benchmarks.record_ops`; `lazyxla bench` runs it in its own process.
"""
from __future__ import annotations

import statistics
import sys
import time

BUDGET_US = 10.0


def cases(torch, F):
    """(name, aten ops the call records, make(device) -> the call to time); small shapes:
    recording does not depend on them."""
    def tensors(dev):
        g = torch.Generator().manual_seed(0)
        a, b = (torch.randn(32, 256, generator=g).to(dev) for _ in range(2))
        w = torch.randn(256, 256, generator=g).to(dev)
        return a, b, w

    def case(fn):
        def make(dev):
            a, b, w = tensors(dev)
            return lambda: fn(a, b, w)
        return make

    def foreach(dev):  # an optimizer's list of 8 parameters: time per tensor of the list
        g = torch.Generator().manual_seed(0)
        shapes = [(256, 256), (256,)] * 3 + [(10, 256), (10,)]
        xs, ys = ([torch.randn(s, generator=g).to(dev) for s in shapes] for _ in range(2))
        return lambda: torch._foreach_add_(xs, ys)

    return [
        ("a + b", 1, case(lambda a, b, w: a + b)),
        ("a * 0.5 (Python scalar)", 1, case(lambda a, b, w: a * 0.5)),
        ("relu(a)", 1, case(lambda a, b, w: torch.relu(a))),
        ("exp(a)", 1, case(lambda a, b, w: a.exp())),
        ("a.sum(1)", 1, case(lambda a, b, w: a.sum(1))),
        ("a @ w", 1, case(lambda a, b, w: a @ w)),
        ("F.linear(a, w) (t + addmm)", 2, case(lambda a, b, w: F.linear(a, w))),
        ("a.add_(b) (in place)", 1, case(lambda a, b, w: a.add_(b))),
        ("a.view(-1) (view)", 1, case(lambda a, b, w: a.view(-1))),
        ("a.t() (view)", 1, case(lambda a, b, w: a.t())),
        ("a[1:] (slice view)", 1, case(lambda a, b, w: a[1:])),
        ("torch.cat([a, b])", 1, case(lambda a, b, w: torch.cat([a, b]))),
        ("torch.where(a > 0, a, b)", 2, case(lambda a, b, w: torch.where(a > 0, a, b))),
        ("softmax(a, 1)", 1, case(lambda a, b, w: a.softmax(1))),
        ("_foreach_add_ of 8 tensors (per tensor)", 8, foreach),
    ]


def _round(fn, per_round) -> float:
    t0 = time.perf_counter()
    for _ in range(per_round):
        fn()
    return (time.perf_counter() - t0) / per_round * 1e6


def measure(per_round=100, rounds=30) -> list[dict]:
    import torch
    import torch.nn.functional as F
    import lazyxla
    dev = lazyxla.device()
    table = cases(torch, F)
    calls = [(make(dev), lazyxla.sync) for _, _, make in table] + \
            [(make("cpu"), lambda: None) for _, _, make in table]
    times = [[] for _ in calls]
    for fn, between in calls:  # warm-up: meta caches, the programs the syncs compile
        fn()
        between()
    for _ in range(rounds):
        for (fn, between), ts in zip(calls, times):
            ts.append(_round(fn, per_round))
            between()
    rows = []
    for (name, n_ops, _), lazy, eager in zip(table, times, times[len(table):]):
        call = statistics.median(lazy)
        rows.append({"op": name, "ops": n_ops, "lazy_us": call, "per_op_us": call / n_ops,
                     "eager_us": statistics.median(eager), "ok": call / n_ops <= BUDGET_US})
    return rows


def render(rows) -> list[str]:
    ok = sum(r["ok"] for r in rows)
    lines = [f"## Recording in lazy mode (budget <= {BUDGET_US:g} us per aten op): {ok} of {len(rows)} within",
             "",
             "Median time per call over rounds of 100 calls, synced between rounds (untimed), the "
             "rounds of all calls alternating; per op = per call / the aten ops it records. eager = "
             "the same call on the CPU, computing, on the same tensors (32x256 float32).",
             "",
             "| call | aten ops | lazyxla records, us per call | us per op | eager CPU, us per call | budget |",
             "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['ops']} | {r['lazy_us']:.1f} | {r['per_op_us']:.1f} | "
                     f"{r['eager_us']:.1f} | {'ok' if r['ok'] else 'MISS'} |")
    return lines


def run(job) -> dict:
    import torch
    torch.set_num_threads(job.get("threads", 1))
    rows = measure(rounds=15 if job.get("quick") else 30)
    return {"system": "lazy", "workload": "ops", "mode": "record", "ok": True, "rows": rows}


if __name__ == "__main__":
    print("\n".join(render(measure())))
    sys.exit(0)

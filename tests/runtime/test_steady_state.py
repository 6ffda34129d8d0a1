"""A long training loop holds no more Python objects at step 350 than at step 150: lazy mode and
torch.compile alike, with a learning rate that changes every step (new runtime scalars each
time, kept for reuse in a bounded cache), a ragged last batch now and then (a second program) and
the loss read every few steps."""
import collections
import gc

import pytest
import torch

import lazyxla
from lazyxla import jaxenv


def _loop(compiled: bool):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3)).to(lazyxla.device())
    x = torch.randn(6, 8).to(lazyxla.device())
    y = torch.tensor([0, 1, 2, 0, 1, 2]).to(lazyxla.device())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 1000)

    def loss_of(a, b):
        return torch.nn.functional.cross_entropy(model(a), b)
    forward, opt_step = loss_of, opt.step
    if compiled:
        forward = torch.compile(loss_of, backend="lazyxla")
        opt_step = torch.compile(opt.step, backend="lazyxla")

    def steps(n, start):
        losses = []
        for i in range(start, start + n):
            rows = 6 if i % 5 else 4
            loss = forward(x[:rows], y[:rows])
            loss.backward()
            opt_step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            if not compiled:
                lazyxla.sync()
            if i % 10 == 0:
                losses.append(loss.item())
        return losses
    return steps


def _objects():
    lazyxla.wait()
    gc.collect()
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


@pytest.mark.parametrize("compiled", [False, True], ids=["lazy", "compiled"])
def test_a_training_loop_holds_no_more_objects_as_it_runs(compiled, monkeypatch):
    # the runtime scalars' cache (1024 arrays) bounded lower, so that the warm-up fills it: three
    # new values a step (the learning rate, AdamW's step size and bias correction)
    monkeypatch.setattr(jaxenv, "_SCALARS_MAX", 64)
    steps = _loop(compiled)
    steps(150, 0)  # (programs compiled, caches full, objects made on first use made)
    _objects()  # (the first census makes objects of its own: 41 pybind11 bound methods)
    before = _objects()
    losses = steps(200, 150)
    after = _objects()
    grown = {k: after[k] - before[k] for k in after if after[k] - before[k] > 0}
    # (a few objects come and go with the collector's timing; 200 steps leaking one object each
    # would show as 200)
    assert sum(grown.values()) < 40, f"objects grew over 200 steps: {grown}"
    assert losses[-1] < losses[0]

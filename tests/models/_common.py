"""Shared by the real-model tests: compile counting, fallback checks, train loops."""
import copy

import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()


def compiles() -> int:
    return metrics.counter_value("UncachedCompile") or 0


def assert_no_fallbacks():
    assert metrics.executed_fallback_ops() == [], metrics.fallback_sites()


def assert_close(actual, expected, rtol=1e-4, atol=1e-4):
    torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=rtol, atol=atol)


def check_training(make_model, batches, loss_fn, compiled, rtol=1e-4, atol=1e-4):
    """AdamW steps on a CPU copy (eager) and a lazyxla copy in lockstep; losses and parameters
    agree after the steps."""
    torch._dynamo.reset()
    ref = make_model()
    ref.train()
    dev_model = copy.deepcopy(ref).to(D)
    step_model = torch.compile(dev_model, backend="lazyxla") if compiled else dev_model
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    opt = torch.optim.AdamW(dev_model.parameters(), lr=1e-3)
    metrics.clear_counters()
    ref_losses, got = [], []
    for batch in batches:
        ref_opt.zero_grad()
        opt.zero_grad()
        loss = loss_fn(ref, *batch)
        loss.backward()
        ref_opt.step()
        ref_losses.append(loss.item())
        loss = loss_fn(step_model, *[b.to(D) for b in batch])
        loss.backward()
        opt.step()
        lazyxla.sync()
        got.append(loss.detach())
    got_losses = [l.item() for l in got]
    assert_no_fallbacks()
    torch.testing.assert_close(torch.tensor(got_losses), torch.tensor(ref_losses), rtol=rtol, atol=atol)
    assert ref_losses[-1] < ref_losses[0]
    for (name, p), q in zip(dev_model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=rtol, atol=atol,
                                   msg=lambda m: f"{name}: {m}")

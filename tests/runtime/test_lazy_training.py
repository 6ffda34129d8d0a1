"""A lazy-mode training loop matches eager and stops compiling after its first steps."""
import copy

import torch

import lazyxla
from lazyxla import metrics


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _train(model, device, steps=50):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses, compile_counts = [], []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g).to(device)
        y = torch.randn(8, 4, generator=g).to(device)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if device != "cpu":
            lazyxla.sync()
            compile_counts.append((metrics.metric_data("CompileTime") or (0,))[0])
        losses.append(loss.item())
    return losses, compile_counts


def test_adamw_mlp_50_steps_matches_eager():
    cpu_model = _mlp()
    dev_model = copy.deepcopy(cpu_model).to(lazyxla.device())
    ref, _ = _train(cpu_model, "cpu")
    got, compiles = _train(dev_model, lazyxla.device())
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=1e-5, atol=1e-6)
    assert compiles[-1] == compiles[3], f"CompileTime kept growing: {compiles}"
    for p, q in zip(dev_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.cpu(), q.detach(), rtol=1e-4, atol=1e-5)

"""nn.LSTM, nn.GRU, LSTMCell and GRUCell: on a PrivateUse1 device PyTorch calls the fused cell
kernels, which lazyxla lowers (ATen has them for CUDA only). Outputs, states and gradients of
inputs, states and weights against eager CPU, which runs its unfused path."""
import copy

import pytest
import torch

import lazyxla

D = lazyxla.device()

MODULES = {
    "lstm": lambda: torch.nn.LSTM(4, 3),
    "lstm_no_bias_2_layers": lambda: torch.nn.LSTM(4, 3, num_layers=2, bias=False),
    "lstm_bidirectional_batch_first": lambda: torch.nn.LSTM(4, 3, bidirectional=True, batch_first=True),
    "gru": lambda: torch.nn.GRU(4, 3),
    "gru_no_bias_2_layers": lambda: torch.nn.GRU(4, 3, num_layers=2, bias=False),
    "lstm_cell": lambda: torch.nn.LSTMCell(4, 3),
    "gru_cell_no_bias": lambda: torch.nn.GRUCell(4, 3, bias=False),
}


def _run(module, x, state):
    out = module(x, state)
    flat = []
    for o in out if isinstance(out, tuple) else (out,):
        flat.extend(o if isinstance(o, tuple) else (o,))
    sum(((o * (k + 1)) ** 2).sum() for k, o in enumerate(flat)).backward()
    return flat


def _inputs(name):
    torch.manual_seed(1)
    if "cell" in name:
        x, h = torch.randn(2, 4), torch.randn(2, 3)
        return x, ((h, torch.randn(2, 3)) if "lstm" in name else h)
    layers = 2 if "layers" in name else 1
    dirs = 2 if "bidirectional" in name else 1
    x = torch.randn(2, 5, 4) if "batch_first" in name else torch.randn(5, 2, 4)
    h = torch.randn(layers * dirs, 2, 3)
    return x, ((h, torch.randn(layers * dirs, 2, 3)) if "lstm" in name else h)


def _leaves(x, state, dev):
    def leaf(t):
        return t.detach().clone().to(dev).requires_grad_()
    return leaf(x), (tuple(leaf(s) for s in state) if isinstance(state, tuple) else leaf(state))


@pytest.mark.parametrize("name", MODULES.keys())
def test_recurrent_module_matches_eager(name):
    torch.manual_seed(0)
    cpu = MODULES[name]()
    dev = copy.deepcopy(cpu).to(D)
    x, state = _inputs(name)
    xc, sc = _leaves(x, state, "cpu")
    xd, sd = _leaves(x, state, D)
    before = set(lazyxla.metrics.executed_fallback_ops())
    expected, got = _run(cpu, xc, sc), _run(dev, xd, sd)
    assert set(lazyxla.metrics.executed_fallback_ops()) == before  # lowered, not run on the CPU
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-5)
    grads = [(a, b) for a, b in zip((xd,) + tuple(sd if isinstance(sd, tuple) else (sd,)),
                                    (xc,) + tuple(sc if isinstance(sc, tuple) else (sc,)))]
    grads += list(zip(dev.parameters(), cpu.parameters()))
    for d, c in grads:
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-5, atol=1e-5)


def test_compiled_lstm_matches_eager():
    torch.manual_seed(0)
    cpu = torch.nn.LSTM(4, 3)
    dev = copy.deepcopy(cpu).to(D)
    f = torch.compile(lambda m, x: m(x)[0].sum(), backend="lazyxla")
    for k in range(2):
        x = torch.randn(5, 2, 4) + k
        torch.testing.assert_close(f(dev, x.to(D)).cpu(), cpu(x)[0].sum(), rtol=1e-5, atol=1e-5)

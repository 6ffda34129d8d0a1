"""Activations and their backward ops against eager CPU PyTorch (forward values and gradients)."""
import math

import pytest
import torch
import torch.nn.functional as F

from lazyxla import metrics
from lazyxla.testing import check, check_grad

inf, nan = math.inf, math.nan

# Values around every kink/threshold in the functions below (0, +-1, +-3, 20, ...), plus inf/nan.
X = torch.tensor([-25.0, -4.0, -3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 0.1, 0.5, 1.0, 2.9, 3.0, 3.5, 21.0])
X_SPECIAL = torch.tensor([inf, -inf, nan, 0.0])

ACTS = {
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": F.relu,
    "threshold": lambda x: F.threshold(x, 0.1, 2.0), "leaky_relu": F.leaky_relu,
    "leaky_relu_0.2": lambda x: F.leaky_relu(x, 0.2), "elu": F.elu,
    "elu_alpha": lambda x: F.elu(x, alpha=0.5), "selu": F.selu, "celu": lambda x: F.celu(x, 1.5),
    "hardtanh": F.hardtanh, "hardtanh_args": lambda x: F.hardtanh(x, -2.0, 0.5), "relu6": F.relu6,
    "softplus": F.softplus, "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "mish": F.mish,
    "logsigmoid": F.logsigmoid, "hardshrink": F.hardshrink, "softshrink": F.softshrink,
    "softsign": F.softsign, "tanhshrink": F.tanhshrink,
    "logit": lambda x: torch.logit(torch.sigmoid(x * 0.5)), "logit_eps": lambda x: torch.logit(x * 0.1, eps=0.2),
}

def _fallbacks():
    """Ops of this area that ran on the CPU (check_grad's .sum() belongs to the reductions)."""
    return [op for op in metrics.executed_fallback_ops() if not op.startswith("sum")]


# Where PyTorch's gradient at a kink is a convention (x == threshold), both sides use the same one,
# so the kink values stay in.


@pytest.mark.parametrize("name", list(ACTS))
def test_forward(name):
    fn = ACTS[name]
    check(lambda x, s: (fn(x), fn(s)), X, X_SPECIAL)


@pytest.mark.parametrize("name", list(ACTS))
def test_grad(name):
    fn = ACTS[name]
    metrics.clear_counters()
    check_grad(fn, X, atol=1e-5, rtol=1e-5)
    assert not _fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_gelu_at_infinity_is_this_machines_eager(dtype):
    # eager's vectorized kernel gives NaN at +inf for float32 on AVX-512 CPUs and inf on AVX2 ones
    long = torch.full((64,), inf, dtype=dtype)
    check(lambda a, b: (F.gelu(a), F.gelu(b)), long, X_SPECIAL.to(dtype))


@pytest.mark.parametrize("name", ["gelu", "silu", "elu", "softplus", "hardswish", "mish", "leaky_relu"])
def test_bf16_and_f64(name):
    fn = ACTS[name]
    check(fn, X.bfloat16())
    check(fn, X.double())


def test_glu():
    x = torch.randn(4, 6)
    check(lambda x: (F.glu(x), F.glu(x, 0)), x)
    metrics.clear_counters()
    check_grad(lambda x: F.glu(x, 0) * 2, x)
    check_grad(F.glu, x)
    assert not _fallbacks()


def test_prelu():
    x = torch.randn(2, 3, 4)
    w = torch.tensor([0.25, -0.5, 2.0])
    check(F.prelu, x, w)
    metrics.clear_counters()
    check_grad(F.prelu, x, w)
    check_grad(F.prelu, x, torch.tensor([0.1]))
    assert not _fallbacks()


def test_backward_ops_direct():
    """The backward ops as autograd calls them, including the non-default flags."""
    g, x = torch.randn(15), X
    aten = torch.ops.aten
    y = torch.sigmoid(x)
    check(lambda g, x, y: (
        aten.sigmoid_backward(g, y), aten.tanh_backward(g, torch.tanh(x)),
        aten.threshold_backward(g, x, 0.5), aten.leaky_relu_backward(g, x, 0.3, False),
        aten.elu_backward(g, 1.5, 1.0507, 1.0, False, x),
        aten.elu_backward(g, 1.5, 1.0507, 1.0, True, F.elu(x, 1.5) * 1.0507),
        aten.hardtanh_backward(g, x, -1.0, 1.0), aten.softplus_backward(g, x, 1.0, 20.0),
        aten.hardsigmoid_backward(g, x), aten.hardswish_backward(g, x),
        aten.gelu_backward(g, x), aten.gelu_backward(g, x, approximate="tanh"),
        aten.logit_backward(g, y), aten.logit_backward(g, y, 0.3),
        aten.hardshrink_backward(g, x, 0.5), aten.softshrink_backward(g, x, 0.5),
        aten.log_sigmoid_backward(g, x, torch.exp(-x.abs())),
    ), g, x, y, atol=1e-5, rtol=1e-5)


def test_log_sigmoid_forward_buffer():
    check(lambda x: torch.ops.aten.log_sigmoid_forward(x), X)


def test_inplace_activations():
    def f(x):
        x = x.clone()
        F.relu(x[0], inplace=True)
        F.leaky_relu_(x[1], 0.1)
        F.hardtanh_(x[2], -0.5, 0.5)
        F.elu_(x[3])
        torch.sigmoid_(x[4])
        return x
    check(f, torch.randn(5, 3))


def test_mlp_training_step():
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    w1, w2 = torch.randn(3, 5), torch.randn(5, 2)

    def model(x, w1, w2):
        h = F.gelu(x @ w1)
        h = F.silu(h) + F.softplus(h)
        return torch.tanh(h @ w2)
    check_grad(model, x, w1, w2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_hardswish_and_hardsigmoid_divide_as_eager(dtype):
    """eager's kernels divide by 6 (and hardswish's backward x by 3); XLA multiplied by the
    rounded reciprocal: 5138 of 20000 float32 hardswish elements and 4199 gradients an ulp off."""
    g = torch.Generator().manual_seed(0)
    x, dy = (torch.randn(4000, generator=g) * 4).to(dtype), torch.randn(4000, generator=g).to(dtype)
    x[:3] = torch.tensor([-3.0, 3.0, 0.0])
    check(lambda x, dy: (F.hardswish(x), F.hardsigmoid(x), torch.ops.aten.hardswish_backward(dy, x),
                         torch.ops.aten.hardsigmoid_backward(dy, x)), x, dy, atol=0, rtol=0)

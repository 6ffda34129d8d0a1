"""_foreach ops as eager's CPU kernels compute them: the plain op on each tensor of the list, with
its dtypes, promotion, integer semantics and errors (an int8 list to an int8 power wraps, a bool
list has no sign error but no trunc, a maximum with a scalar is clamp_min)."""
import math

import pytest
import torch

import lazyxla
from lazyxla.testing import sample

D = lazyxla.device()
SHAPES = [(2, 3), (), (0,)]


def _list(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [sample(shape, dtype, g) for shape in SHAPES]


# name -> fn(xs, ys, zs): a _foreach call on three lists
CALLS = {
    "sigmoid": lambda xs, ys, zs: torch._foreach_sigmoid(xs),
    "sign": lambda xs, ys, zs: torch._foreach_sign(xs),
    "trunc": lambda xs, ys, zs: torch._foreach_trunc(xs),
    "frac_": lambda xs, ys, zs: torch._foreach_frac_(xs),
    "abs_": lambda xs, ys, zs: torch._foreach_abs_(xs),
    "add_list_alpha": lambda xs, ys, zs: torch._foreach_add(xs, ys, alpha=2),
    "sub_scalar": lambda xs, ys, zs: torch._foreach_sub(xs, 1.5),
    "mul_scalar_list_": lambda xs, ys, zs: torch._foreach_mul_(xs, [2, -1, 3]),
    "div_list": lambda xs, ys, zs: torch._foreach_div(xs, ys),
    "div_scalar_zero": lambda xs, ys, zs: torch._foreach_div(xs, 0),
    "pow_list": lambda xs, ys, zs: torch._foreach_pow(xs, ys),
    "pow_scalar": lambda xs, ys, zs: torch._foreach_pow(xs, 3),
    "pow_bool_exponent_": lambda xs, ys, zs: torch._foreach_pow_(xs, True),
    "pow_scalar_base": lambda xs, ys, zs: torch._foreach_pow(2.0, xs),
    "maximum_scalar": lambda xs, ys, zs: torch._foreach_maximum(xs, 1),
    "clamp_min_list_": lambda xs, ys, zs: torch._foreach_clamp_min_(xs, ys),
    "minimum_list": lambda xs, ys, zs: torch._foreach_minimum(xs, ys),
    "addcmul_float_value": lambda xs, ys, zs: torch._foreach_addcmul(xs, ys, zs, 1.5),
    "addcdiv_values_": lambda xs, ys, zs: torch._foreach_addcdiv_(xs, ys, zs, [0.5, 2.0, 1.0]),
    "lerp_scalar": lambda xs, ys, zs: torch._foreach_lerp(xs, ys, 0.25),
    "norm": lambda xs, ys, zs: torch._foreach_norm(xs, 3),
    "norm_bool_order": lambda xs, ys, zs: torch._foreach_norm(xs, True),
}
DTYPES = [torch.float32, torch.int8, torch.bool, torch.complex64]


def _outcome(fn):
    try:
        return "ok", [t.cpu() for t in fn()]
    except Exception as e:
        return "error", type(e).__name__, str(e).splitlines()[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d)[6:] for d in DTYPES])
@pytest.mark.parametrize("name", CALLS)
def test_foreach_as_eager(name, dtype):
    fn = CALLS[name]
    lists = [_list(dtype, s) for s in (0, 10, 20)]

    def call(device):
        args = [[t.clone().to(device) for t in ts] for ts in lists]  # (in-place calls write them)
        out = fn(*args)
        return args[0] if out is None else out  # in place: the first list, written
    expected, actual = _outcome(lambda: call("cpu")), _outcome(lambda: call(D))
    if expected[0] == "error":
        assert actual[:2] == expected[:2], (expected, actual)
        return
    assert actual[0] == "ok", actual
    for e, a in zip(expected[1], actual[1]):
        assert a.dtype == e.dtype and a.shape == e.shape
        torch.testing.assert_close(a, e, equal_nan=True)


def test_foreach_norm_order_without_identity_over_an_empty_tensor():
    xs = [torch.zeros(0), torch.ones(2)]
    for ord in (math.inf, -1.0):
        with pytest.raises(RuntimeError, match="empty tensor"):
            torch._foreach_norm([x.to(D) for x in xs], ord)


def test_a_half_dtypes_error_is_worded_for_the_half_dtype():
    """The dtype probe tells a half-only gap of the CPU from eager's error by running again in
    float32; the error raised was that run's ("ComplexFloat can't be cast to ... Float")."""
    for dtype in (torch.float16, torch.bfloat16):
        with pytest.raises(RuntimeError) as cpu:
            torch._foreach_add_([torch.ones(2, dtype=dtype)], 1 + 1j)
        with pytest.raises(RuntimeError) as dev:
            torch._foreach_add_([torch.ones(2, dtype=dtype).to(D)], 1 + 1j)
        assert str(dev.value) == str(cpu.value)


# in-place and out= foreach calls, and fused optimizer steps, whose targets' version counters
# eager's CPU kernels bump (the foreach ones) or leave (the fused step's)
VERSIONED = {
    "add_list_": lambda xs, ys: torch._foreach_add_(xs, ys),
    "mul_scalar_": lambda xs, ys: torch._foreach_mul_(xs, 2.0),
    "zero_": lambda xs, ys: torch._foreach_zero_(xs),
    "add_out": lambda xs, ys: torch.ops.aten._foreach_add.List_out(ys, ys, out=xs),
    "fused_adamw_": lambda xs, ys: torch._fused_adamw_(
        xs, ys, [torch.zeros_like(x) for x in xs], [torch.zeros_like(x) for x in xs], [],
        [torch.ones((), device=xs[0].device) for _ in xs], lr=0.1, beta1=0.9, beta2=0.99,
        weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False),
}


@pytest.mark.parametrize("name", VERSIONED)
def test_foreach_targets_version_counters_move_as_in_eager(name):
    """Autograd compares version counters to tell that a tensor saved for a backward was changed
    in place. The dispatcher bumps an in-place op's targets' counters itself, except for the
    _foreach_ ops, whose kernels do it: lazyxla's did not, so an optimizer step between a
    forward and its backward went unnoticed (see the next test)."""
    def versions(device):
        xs, ys = ([torch.ones(3, device=device) for _ in range(2)] for _ in range(2))
        VERSIONED[name](xs, ys)
        return [t._version for t in xs + ys]
    assert versions(D) == versions("cpu")


def test_a_foreach_optimizer_step_between_forward_and_backward_raises_as_in_eager():
    def run(device):
        torch.manual_seed(0)
        lin = torch.nn.Linear(4, 3).to(device)
        x = torch.randn(2, 4, device=device, requires_grad=True)
        lin(x).sum().backward()
        opt = torch.optim.SGD(lin.parameters(), lr=0.1, foreach=True)
        loss = lin(x).sum()
        opt.step()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
    run("cpu")
    run(D)

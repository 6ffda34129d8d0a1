"""torch.autocast("lazyxla") follows CUDA's op policy; GradScaler's kernels are lowered."""
import copy

import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics

D = lazyxla.device()
A, B = torch.randn(4, 8), torch.randn(8, 3)
IMG, W = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)

# op under autocast(bf16) -> (result dtype, the same computation with explicit casts on the CPU)
BF = torch.bfloat16
POLICY = {
    "mm_lower": (lambda a, b: a @ b, BF, lambda a, b: a.to(BF) @ b.to(BF)),
    "linear_lower": (lambda a, b: F.linear(a, b.t()), BF, lambda a, b: F.linear(a.to(BF), b.t().to(BF))),
    "conv2d_lower": (lambda a, b: F.conv2d(IMG.to(a.device), W.to(a.device)), BF,
                     lambda a, b: F.conv2d(IMG.to(BF), W.to(BF))),
    "softmax_fp32": (lambda a, b: (a @ b).softmax(-1), torch.float32,
                     lambda a, b: (a.to(BF) @ b.to(BF)).float().softmax(-1)),
    "sum_fp32_unless_dtype": (lambda a, b: (a @ b).sum(), torch.float32,
                              lambda a, b: (a.to(BF) @ b.to(BF)).sum(dtype=torch.float32)),
    "sum_given_dtype": (lambda a, b: (a @ b).sum(dtype=BF), BF, lambda a, b: (a.to(BF) @ b.to(BF)).sum(dtype=BF)),
    "exp_fp32": (lambda a, b: (a @ b).exp(), torch.float32, lambda a, b: (a.to(BF) @ b.to(BF)).float().exp()),
    "layer_norm_fp32": (lambda a, b: F.layer_norm(a.to(BF), (8,)), torch.float32, lambda a, b: F.layer_norm(a, (8,))),
    "addcmul_promotes": (lambda a, b: torch.addcmul(a.to(BF)[:, :3], a[:, :3], a[:, 3:6]), torch.float32,
                         lambda a, b: torch.addcmul(a.to(BF)[:, :3].float(), a[:, :3], a[:, 3:6])),
    "float64_untouched": (lambda a, b: a.double() @ b.double(), torch.float64, lambda a, b: a.double() @ b.double()),
    "relu_passes_through": (lambda a, b: a.relu(), torch.float32, lambda a, b: a.relu()),
    "cross_entropy_fp32": (lambda a, b: F.cross_entropy(a @ b, torch.tensor([0, 1, 2, 0]).to(a.device)),
                           torch.float32, lambda a, b: F.cross_entropy((a.to(BF) @ b.to(BF)).float(),
                                                                       torch.tensor([0, 1, 2, 0]))),
}


@pytest.mark.parametrize("case", POLICY.values(), ids=POLICY.keys())
def test_autocast_policy_matches_cuda(case):
    fn, dtype, reference = case
    with torch.autocast("lazyxla", dtype=BF):
        out = fn(A.to(D), B.to(D))
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu(), reference(A, B), rtol=2e-2, atol=2e-2)


def test_no_autocast_outside_the_region_and_when_disabled():
    assert (A.to(D) @ B.to(D)).dtype == torch.float32
    with torch.autocast("lazyxla", dtype=BF, enabled=False):
        assert (A.to(D) @ B.to(D)).dtype == torch.float32
    with torch.autocast("lazyxla", dtype=torch.float16):
        assert (A.to(D) @ B.to(D)).dtype == torch.float16


def test_binary_cross_entropy_refused_as_on_cuda():
    with torch.autocast("lazyxla", dtype=BF), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(torch.rand(3).to(D), torch.rand(3).to(D))


def _scaled_steps(dev, steps, grad_hook=None, growth_interval=2000):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    model = copy.deepcopy(model).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(torch.device(dev).type, init_scale=2.0 ** 10,
                                  growth_interval=growth_interval)
    x, y = A.to(dev), torch.tensor([0, 1, 2, 0]).to(dev)
    for i in range(steps):
        with torch.autocast(torch.device(dev).type, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if grad_hook is not None:
            grad_hook(i, model)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    return [p.detach().cpu() for p in model.parameters()], scaler.get_scale()


def test_grad_scaler_training_matches_cpu_without_fallback():
    metrics.clear_all()
    got, scale = _scaled_steps(D, 3, growth_interval=1)
    assert not any(op.startswith("_amp") for op in metrics.executed_fallback_ops())
    expected, cpu_scale = _scaled_steps("cpu", 3, growth_interval=1)
    assert scale == cpu_scale == 2.0 ** 13  # grown after each successful step
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-3)


def test_grad_scaler_skips_a_step_with_inf_and_backs_off():
    def poison(i, model):
        if i == 1:
            model[0].weight.grad[0, 0] = float("inf")
    got, scale = _scaled_steps(D, 3, poison)
    expected, cpu_scale = _scaled_steps("cpu", 3, poison)
    assert scale == cpu_scale == 2.0 ** 9
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-3)


def test_autocast_inside_torch_compile():
    def f(a, b):
        with torch.autocast("lazyxla", dtype=BF):
            return (a @ b).softmax(-1), a @ b
    g = torch.compile(f, backend="lazyxla")
    soft, prod = g(A.to(D), B.to(D))
    assert (soft.dtype, prod.dtype) == (torch.float32, BF)
    torch.testing.assert_close(prod.cpu(), A.to(BF) @ B.to(BF), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(soft.cpu(), (A.to(BF) @ B.to(BF)).float().softmax(-1), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_grad_scaler_step_reads_the_device_only_without_a_fused_optimizer(fused):
    """PyTorch's GradScaler reads found_inf to decide whether to step (a sync per step), except
    for optimizers that take it as an argument: fused Adam/AdamW skip on the device."""
    model = torch.nn.Linear(8, 3).to(D)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused)
    scaler = torch.amp.GradScaler("lazyxla")
    for _ in range(2):
        with torch.autocast("lazyxla", dtype=torch.float16):
            loss = model(A.to(D)).float().square().mean()
        scaler.scale(loss).backward()
        lazyxla.sync()
        reads = metrics.metric_count("TransferFromDeviceTime")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        lazyxla.sync()
        assert metrics.metric_count("TransferFromDeviceTime") - reads == (0 if fused else 1)

import pytest
import torch

import lazyxla
from lazyxla.testing import check_grad

D = lazyxla.device()


def test_backward_on_device():
    x = torch.randn(4, 3, device=lazyxla.device(), requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.device.type == "lazyxla"
    torch.testing.assert_close(x.grad.cpu(), 2 * x.detach().cpu())


def test_backward_of_op_that_saves_its_output():
    check_grad(lambda x: torch.exp(x), torch.randn(5))


def test_mlp_gradients_match_cpu():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x, y = torch.randn(6, 4), torch.randn(6, 2)
    loss = torch.nn.functional.mse_loss(m(x), y)
    loss.backward()
    ref = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    d = lazyxla.device()
    m.to(d)
    loss_d = torch.nn.functional.mse_loss(m(x.to(d)), y.to(d))
    loss_d.backward()
    torch.testing.assert_close(loss_d.cpu(), loss.detach())
    for p, g in zip(m.parameters(), ref):
        torch.testing.assert_close(p.grad.cpu(), g)


def test_error_inside_backward_is_a_python_exception():
    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom in backward")
    x = torch.ones(2, device=lazyxla.device(), requires_grad=True)
    try:
        Boom.apply(x).sum().backward()
    except ValueError as e:
        assert "boom" in str(e)
    else:
        raise AssertionError("expected the backward error")


def test_backward_runs_on_the_calling_thread_unless_opted_out():
    """Without CUDA/XPU/MPS, importing lazyxla turns autograd's device threads off for the
    importing thread (its kernels only record IR); LAZYXLA_AUTOGRAD_DEVICE_THREADS=1 keeps them."""
    import os
    import subprocess
    import sys
    probe = ("import threading, torch, lazyxla\n"
             "x = torch.ones(3, device=lazyxla.device(), requires_grad=True)\n"
             "seen = []\n"
             "x.register_hook(lambda g: seen.append(threading.current_thread() is threading.main_thread()))\n"
             "(x * 2).sum().backward()\n"
             "print(seen[0], torch._C._is_multithreading_enabled())\n")
    env = dict(os.environ)
    env.pop("LAZYXLA_AUTOGRAD_DEVICE_THREADS", None)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "False"], out.stderr[-2000:]
    env["LAZYXLA_AUTOGRAD_DEVICE_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]


def _setitem(x):
    x[2] = 0.0
    return x * x


@pytest.mark.parametrize("inplace_on_view", [
    lambda x: (x[1:].mul_(2), x)[1],
    _setitem,
    lambda x: (x.view(2, 2).diagonal().zero_(), x)[1],
    lambda x: (x.view(2, 2).t()[0].exp_(), x)[1],
], ids=["slice_mul_", "setitem", "diagonal_zero_", "transpose_select_exp_"])
@pytest.mark.parametrize("replay", [True, False], ids=["view_replay", "as_strided"])
def test_gradients_through_in_place_ops_on_views(inplace_on_view, replay):
    """Autograd rebuilds a view after an in-place op on it: by replaying the view ops (lazyxla's
    default) or, without view replay (another thread), with as_strided of the view's strides and
    offset, which lazyxla's views report as eager does."""
    grads = []
    try:
        torch._C._set_view_replay_enabled(replay)
        for dev in ("cpu", D):
            a = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
            inplace_on_view(a.to(dev) * 1).sum().backward()
            grads.append(a.grad)
    finally:
        torch._C._set_view_replay_enabled(True)
    torch.testing.assert_close(grads[1], grads[0])


def test_view_replay_is_enabled_in_other_threads_on_request():
    import threading
    seen = []

    def work():
        seen.append(torch._C._is_view_replay_enabled())
        lazyxla.enable_view_replay()
        seen.append(torch._C._is_view_replay_enabled())
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [False, True]

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


_RAISING_HOOKS = """
import sys, torch, lazyxla
D = lazyxla.device()
def boom(*args):
    raise ValueError("boom in a hook")
x = torch.ones(4, 3, device=D, requires_grad=True)
m = torch.nn.Linear(3, 2).to(D)
kind = sys.argv[1]
if kind == "leaf":
    x.register_hook(boom)
elif kind == "post_accumulate":
    x.register_post_accumulate_grad_hook(boom)
elif kind == "module":
    m.register_full_backward_hook(boom)
elif kind == "module_pre":
    m.register_full_backward_pre_hook(boom)
inp = x * 2
if kind == "tensor":
    inp.register_hook(boom)
try:
    m(inp).sum().backward()
except ValueError as e:
    print("raised:", e)
else:
    print("no error")
print("alive", (x * 3).sum().item())
"""


@pytest.mark.parametrize("kind", ["tensor", "leaf", "post_accumulate", "module", "module_pre"])
def test_a_hook_that_raises_makes_the_backward_raise_instead_of_aborting_the_process(kind):
    """PyTorch's guard for a Python-registered device calls into Python from noexcept stream
    functions, which the engine calls while it unwinds from a hook's exception: the process
    aborted (std::terminate). The backward now raises the hook's error (device/hooks.py)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _RAISING_HOOKS, kind], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["raised: boom in a hook", "alive 36.0"], out.stdout


def test_a_hook_that_raises_on_the_cpu_raises_as_before():
    x = torch.ones(3, requires_grad=True)
    x.register_hook(lambda g: (_ for _ in ()).throw(KeyError("cpu hook")))
    with pytest.raises(KeyError, match="cpu hook"):
        (x * 2).sum().backward()


def test_a_hook_that_raises_in_a_backward_called_from_another_thread_makes_it_raise():
    """A backward called from a thread other than the importing one runs on autograd's device
    thread: the hook's error was kept in that thread's slot, which no backward call read, so the
    backward returned normally, and every later hook error on that thread was dropped too."""
    import threading
    outcomes = []

    def work():
        for n in range(2):
            x = torch.ones(3, device=D, requires_grad=True)
            x.register_hook(lambda g, n=n: (_ for _ in ()).throw(ValueError(f"boom {n}")))
            try:
                (x * 2).sum().backward()
            except ValueError as e:
                outcomes.append(str(e))
            else:
                outcomes.append("no error")
        y = torch.ones(3, device=D, requires_grad=True)
        (y * 2).sum().backward()  # nothing kept is left over for a clean backward
        outcomes.append(y.grad.cpu().tolist())
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert outcomes == ["boom 0", "boom 1", [2.0, 2.0, 2.0]]
    z = torch.ones(3, device=D, requires_grad=True)
    (z * 3).sum().backward()
    assert z.grad.cpu().tolist() == [3.0, 3.0, 3.0]


def test_hooks_on_lazyxla_tensors_still_change_gradients_and_can_be_removed():
    x = torch.ones(3, device=D, requires_grad=True)
    handle = x.register_hook(lambda g: g * 10)
    (x * 2).sum().backward()
    assert x.grad.cpu().tolist() == [20.0, 20.0, 20.0]
    handle.remove()
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.cpu().tolist() == [2.0, 2.0, 2.0]


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

"""Compiled functions under autograd's other modes: forward AD, batched gradients, compiled
autograd. Their results must match eager's (and aot_eager's)."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch._dynamo import compiled_autograd

import lazyxla

DEV = "lazyxla"


def _sin2(a):
    return a.sin() * 2


@pytest.mark.parametrize("grad_mode", [False, True])
def test_a_compiled_function_carries_forward_ad_tangents(grad_mode):
    torch._dynamo.reset()
    f = torch.compile(_sin2, backend="lazyxla")
    x, t = torch.arange(3.), torch.tensor([1., 2., -1.])
    with torch.set_grad_enabled(grad_mode), fwAD.dual_level():
        out = f(fwAD.make_dual(x.to(DEV), t.to(DEV)))
        primal, tangent = fwAD.unpack_dual(out)
        assert tangent is not None
        torch.testing.assert_close(tangent.cpu(), 2 * x.cos() * t)
        torch.testing.assert_close(primal.cpu(), _sin2(x))
    # outside the dual level the compiled program runs again
    torch.testing.assert_close(f(x.to(DEV)).cpu(), _sin2(x))


def test_batched_gradients_through_a_compiled_backward():
    """autograd.grad(is_grads_batched=True) runs the backward under the legacy vmap: the compiled
    backward graph gets batched tensors, and runs its ops as they stand."""
    torch._dynamo.reset()
    x = torch.randn(2, 3, device=DEV, requires_grad=True)
    y = torch.compile(torch.sin, backend="lazyxla")(x)
    v = torch.randn(4, 2, 3)
    (g,) = torch.autograd.grad(y, x, v.to(DEV), is_grads_batched=True)
    torch.testing.assert_close(g.cpu(), v * x.detach().cpu().cos())


def test_vectorized_jacobian_of_a_compiled_function():
    torch._dynamo.reset()
    f = torch.compile(lambda a: a.sin().cumsum(0), backend="lazyxla")
    x = torch.tensor([0.5, 1.0, 2.0])
    jac = torch.autograd.functional.jacobian(f, x.to(DEV), vectorize=True)
    expected = torch.autograd.functional.jacobian(lambda a: a.sin().cumsum(0), x)
    torch.testing.assert_close(jac.cpu(), expected)


@pytest.mark.parametrize("compiled_forward", [False, True])
def test_compiled_autograd(compiled_forward):
    torch._dynamo.reset()
    x = torch.tensor([0.5, 1.0, 2.0])
    xd = x.to(DEV).requires_grad_()
    fwd = (lambda a: (a.sin() * a).sum())
    loss = (torch.compile(fwd, backend="lazyxla") if compiled_forward else fwd)(xd)
    with compiled_autograd._enable(torch.compile(backend="lazyxla")):
        loss.backward()
    torch.testing.assert_close(xd.grad.cpu(), x.cos() * x + x.sin())

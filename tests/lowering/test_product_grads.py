"""Gradients of prod and cumprod on the device: eager's values with no, one or several zeros, with
no host read and no CPU fallback (PyTorch's own formulas look at the zeros on the host)."""
import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()

VALUES = {
    "no zero": [[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]],
    "one zero": [[1.5, 0.0, 3.0], [0.5, 4.0, -1.0]],
    "zeros in a row": [[0.0, 0.0, 3.0], [0.5, 4.0, -1.0]],
    "zeros apart": [[0.0, 2.0, 3.0], [0.5, 0.0, -1.0]],
    "zeros last": [[1.0, 2.0, 0.0], [0.0, 3.0, 0.0]],
}
REDUCTIONS = {
    "all": lambda x: x.prod(),
    "dim 1": lambda x: x.prod(1),
    "dim 0 keepdim": lambda x: x.prod(0, keepdim=True),
    "dim -1": lambda x: x.prod(-1),
    "dtype": lambda x: x.prod(1, dtype=torch.float64),
    "cumprod 1": lambda x: x.cumprod(1),
    "cumprod 0": lambda x: x.cumprod(0),
    "cumprod -1 dtype": lambda x: x.cumprod(-1, dtype=torch.float64),
}


def _grads(values, reduce, device, create_graph):
    """The gradient of sum(w * reduce(x)) (w a fixed ramp), and with create_graph the gradient of
    the gradient's squared norm."""
    x = torch.tensor(values).to(device).requires_grad_()
    y = reduce(x)
    w = torch.linspace(0.5, 2.0, y.numel()).reshape(y.shape).to(device=device, dtype=y.dtype)
    g, = torch.autograd.grad((y * w).sum(), x, create_graph=create_graph)
    if not create_graph:
        return (g,)
    gg, = torch.autograd.grad((g * g).sum(), x)
    return g.detach(), gg


@pytest.mark.parametrize("create_graph", [False, True], ids=["grad", "grad of grad"])
@pytest.mark.parametrize("reduction", list(REDUCTIONS))
@pytest.mark.parametrize("case", list(VALUES))
def test_gradients_of_products_match_eager_without_reading_the_device(case, reduction, create_graph):
    lazyxla.sync()
    reads = metrics.metric_count("TransferFromDeviceTime")
    fallbacks = set(metrics.executed_fallback_ops())
    got = _grads(VALUES[case], REDUCTIONS[reduction], D, create_graph)
    lazyxla.sync()
    assert metrics.metric_count("TransferFromDeviceTime") == reads
    assert set(metrics.executed_fallback_ops()) == fallbacks
    got = [t.cpu() for t in got]
    want = _grads(VALUES[case], REDUCTIONS[reduction], "cpu", create_graph)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)


def test_prod_gradient_of_a_scalar_and_of_an_empty_tensor():
    x = torch.tensor(3.0).to(D).requires_grad_()
    x.prod().backward()
    assert x.grad.cpu().item() == 1.0
    e = torch.zeros(0, 3).to(D).requires_grad_()
    e.prod(1).sum().backward()
    assert e.grad.shape == (0, 3)
    e2 = torch.zeros(2, 0).to(D).requires_grad_()
    e2.prod(1).sum().backward()  # prod over an empty dim is 1: no elements to differentiate
    assert e2.grad.shape == (2, 0)


@pytest.mark.parametrize("reduce", [lambda x: x.prod(), lambda x: x.cumprod(0)], ids=["prod", "cumprod"])
def test_gradients_of_complex_products_match_eager(reduce):
    vals = torch.tensor([1 + 2j, 0.5 - 1j, 0j, -3 + 0j])
    x, xd = vals.clone().requires_grad_(), vals.to(D).requires_grad_()
    reduce(x).abs().sum().backward()
    reduce(xd).abs().sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_cumprod_gradient_of_a_scalar_and_of_single_elements():
    x = torch.tensor(3.0).to(D).requires_grad_()
    x.cumprod(0).backward()
    assert x.grad.cpu().item() == 1.0
    r = torch.tensor([[2.0], [0.0]]).to(D).requires_grad_()
    (r.cumprod(1) * 3).sum().backward()
    assert r.grad.cpu().tolist() == [[3.0], [3.0]]


def test_prod_without_grad_records_plainly():
    x = torch.tensor([2.0, 3.0]).to(D)
    assert x.prod().cpu().item() == 6.0
    with torch.no_grad():
        assert x.requires_grad_().prod(0).cpu().item() == 6.0


def test_compiled_product_gradients_match_eager():
    def f(x, w):
        return (x * w).prod(1).sum() + x.prod() + (x.cumprod(1) * w).sum()
    compiled = torch.compile(f, backend="lazyxla")
    w = torch.tensor([0.5, 2.0])
    for values in ([[1.5, -2.0], [3.0, 0.5]], [[0.0, 2.0], [3.0, 0.5]]):
        x, xd = torch.tensor(values, requires_grad=True), torch.tensor(values).to(D).requires_grad_()
        f(x, w).backward()
        compiled(xd, w.to(D)).backward()
        torch.testing.assert_close(xd.grad.cpu(), x.grad)

"""torch._grouped_mm (F.grouped_mm), the experts of a Mixture-of-Experts layer: eager's values in
its four forms, eager's gradients and errors, and the offsets kept on the device: a new routing
of the tokens is the same program (eager's kernel off CUDA reads the offsets to the host and
slices by them, so each routing was a new program)."""
import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()
OFFS = torch.tensor([3, 7, 9], dtype=torch.int32)  # groups 0:3, 3:7, 7:9; row 9 in none


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + len(shape))).to(dtype)


# (a, b, offs, the part of the result eager writes: rows/columns past offs[-1] it leaves unset)
FORMS = {
    "2d x 3d": lambda dt: (_rand(10, 8, dtype=dt), _rand(3, 8, 8, dtype=dt), OFFS, lambda t: t[:9]),
    "2d x 3d, column-major b": lambda dt: (_rand(10, 8, dtype=dt), _rand(3, 8, 8, dtype=dt).transpose(-2, -1),
                                           OFFS, lambda t: t[:9]),
    "3d x 2d": lambda dt: (_rand(3, 4, 8, dtype=dt), _rand(8, 16, dtype=dt), OFFS, lambda t: t[:, :9]),
    "2d x 2d": lambda dt: (_rand(4, 16, dtype=dt), _rand(16, 8, dtype=dt), OFFS, lambda t: t),
    "3d x 3d": lambda dt: (_rand(3, 4, 8, dtype=dt), _rand(3, 8, 8, dtype=dt), None, lambda t: t),
    "offsets past the rows": lambda dt: (_rand(10, 8, dtype=dt), _rand(3, 8, 8, dtype=dt),
                                         torch.tensor([3, 12, 12], dtype=torch.int32), lambda t: t),
    "empty groups": lambda dt: (_rand(10, 8, dtype=dt), _rand(3, 8, 8, dtype=dt),
                                torch.tensor([0, 0, 10], dtype=torch.int32), lambda t: t),
}


def _on(dev, *ts):
    return [t.to(dev) if t is not None else None for t in ts]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_each_form_gives_eagers_products(form, dtype):
    a, b, offs, written = FORMS[form](dtype)
    want = torch._grouped_mm(a, b, offs=offs)
    before = metrics.executed_fallback_ops()
    got = torch._grouped_mm(*_on(D, a, b), offs=_on(D, offs)[0]).cpu()
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(written(got), written(want))
    assert metrics.executed_fallback_ops() == before


def test_rows_past_the_last_offset_are_zeros():
    a, b, offs, _ = FORMS["2d x 3d"](torch.float32)
    assert torch._grouped_mm(*_on(D, a, b), offs=offs.to(D))[9:].cpu().eq(0).all()


def test_gradients_match_eager():
    a, b, offs, _ = FORMS["2d x 3d"](torch.float32)
    grad = _rand(10, 8, seed=3)
    grad[9:] = 0  # (eager's gradient of the unwritten row is unwritten too)
    ea, eb = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch._grouped_mm(ea, eb, offs=offs).backward(grad)
    la, lb = (t.to(D).requires_grad_() for t in (a, b))
    torch._grouped_mm(la, lb, offs=offs.to(D)).backward(grad.to(D))
    torch.testing.assert_close(la.grad.cpu()[:9], ea.grad[:9])
    torch.testing.assert_close(lb.grad.cpu(), eb.grad)


def test_a_new_routing_is_the_same_program():
    a, b, _, _ = FORMS["2d x 3d"](torch.float32)
    ad, bd = _on(D, a, b)
    results = []
    for offs in ([3, 7, 9], [1, 1, 10], [5, 6, 8]):
        offs = torch.tensor(offs, dtype=torch.int32)
        before = metrics.counter_value("UncachedCompile") or 0
        got = torch._grouped_mm(ad, bd, offs=offs.to(D))
        lazyxla.sync()
        results.append(metrics.counter_value("UncachedCompile") - before)
        torch.testing.assert_close(got.cpu()[:offs[-1]], torch._grouped_mm(a, b, offs=offs)[:offs[-1]])
    assert results[1:] == [0, 0], results


@pytest.mark.parametrize("case", [
    lambda a, b, o: torch._grouped_mm(a, b.bfloat16(), offs=o),
    lambda a, b, o: torch._grouped_mm(a.double(), b.double(), offs=o),
    lambda a, b, o: torch._grouped_mm(a, b, offs=o, bias=b[0, 0]),
    lambda a, b, o: torch._grouped_mm(a, b[:, :4], offs=o),
    lambda a, b, o: torch._grouped_mm(a, b, offs=o.reshape(3, 1)),
    lambda a, b, o: torch._grouped_mm(a, b, offs=o.long()),
    lambda a, b, o: torch._grouped_mm(a, b, offs=o, out_dtype=torch.float64),
    lambda a, b, o: torch._grouped_mm(a[0], b, offs=o),
    lambda a, b, o: torch._grouped_mm(a, b),
    lambda a, b, o: torch._grouped_mm(a, b[:2], offs=o),
    lambda a, b, o: torch._grouped_mm(a.reshape(2, 5, 8), b[:2], offs=None).sum() + torch._grouped_mm(
        a.reshape(2, 5, 8), b, offs=None).sum(),
    lambda a, b, o: torch._grouped_mm(torch.zeros(10, 7, device=a.device)[:, :6], b[:, :6], offs=o),
    lambda a, b, o: torch._grouped_mm(a.reshape(10, 4, 2)[:, :, 0], b[:, :4], offs=o),
], ids=["mixed dtypes", "float64", "bias", "contraction", "2-d offsets", "int64 offsets",
        "out_dtype", "1-d operand", "no offsets", "fewer groups", "batches", "unaligned strides",
        "strided rows"])
def test_errors_match_eager(case):
    a, b, offs, _ = FORMS["2d x 3d"](torch.float32)
    with pytest.raises(RuntimeError) as eager:
        case(a, b, offs)
    with pytest.raises(RuntimeError) as ours:  # at the call, not at a later read
        case(*_on(D, a, b, offs))
    assert str(ours.value) == str(eager.value).split("\n")[0]

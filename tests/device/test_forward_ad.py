"""Forward-mode AD (torch.autograd.forward_ad) on the device: tangents as eager's."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import lazyxla


def _tangent(fn, primal, tangent, requires_grad=False):
    """fn's output tangent for a dual of primal and tangent (made by make_tangent(device))."""
    out = {}
    for dev in ("cpu", "lazyxla"):
        x = primal.to(dev).requires_grad_(requires_grad)
        with fwAD.dual_level():
            t = fwAD.unpack_dual(fn(fwAD.make_dual(x, tangent(dev)))).tangent
            out[dev] = None if t is None else t.cpu()
    return out["cpu"], out["lazyxla"]


def test_a_tangent_of_another_layout_than_its_primal():
    """An expanded tangent is copied into zeros laid out as the primal: PyTorch sizes those by
    the primal's storage (aten._new_zeros_with_same_feature_meta), which lazyxla answers."""
    expected, got = _tangent(torch.sin, torch.arange(3.),
                             lambda d: torch.ones((), device=d).expand(3))
    torch.testing.assert_close(got, expected)


def test_linearize():
    x = torch.arange(3.)
    _, jvp_cpu = torch.func.linearize(torch.sin, x)
    _, jvp_dev = torch.func.linearize(torch.sin, x.to("lazyxla"))
    torch.testing.assert_close(jvp_dev(torch.ones(3, device="lazyxla")).cpu(), jvp_cpu(torch.ones(3)))


def test_a_dual_written_into_a_view_gives_its_base_a_tangent():
    tangents = []
    for dev in ("cpu", "lazyxla"):
        base = torch.zeros(2, 3, device=dev)
        with fwAD.dual_level():
            base[0].copy_(fwAD.make_dual(torch.ones(3, device=dev), torch.arange(3., device=dev)))
            tangents.append(fwAD.unpack_dual(base).tangent.cpu())
    torch.testing.assert_close(tangents[1], tangents[0])


_MASK = [True, False, True]
OPS_WITH_LAZYXLA_GRAD_FORMULAS = {
    "prod": lambda d: d.prod(),
    "prod(dim)": lambda d: d.prod(0),
    "cumprod": lambda d: d.cumprod(0),
    "max": lambda d: d.max(),
    "min": lambda d: d.min(),
    "median": lambda d: d.median(),
    "masked_fill": lambda d: d.masked_fill(torch.tensor(_MASK, device=d.device),
                                           torch.tensor(5., device=d.device)),
    "masked_scatter": lambda d: torch.zeros(3, device=d.device).masked_scatter(
        torch.tensor(_MASK, device=d.device), d),
    "index_put (mask)": lambda d: torch.zeros(3, device=d.device).index_put(
        (torch.tensor(_MASK, device=d.device),), d[:2]),
}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", OPS_WITH_LAZYXLA_GRAD_FORMULAS)
def test_ops_with_lazyxla_gradient_formulas_carry_tangents(name, requires_grad):
    """lazyxla's own autograd kernels (lowering/grad_formulas.py) hand a dual level to PyTorch's,
    which know the forward formulas: no tangent lost, no 'implement jvp' error."""
    expected, got = _tangent(OPS_WITH_LAZYXLA_GRAD_FORMULAS[name], torch.tensor([1., 2., 3.]),
                             lambda d: torch.tensor([1., -1., 2.], device=d), requires_grad)
    assert expected is not None
    torch.testing.assert_close(got, expected)


def test_gradcheck_with_forward_ad():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, device="lazyxla", requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: torch.nn.functional.softplus(a).prod(), (x,),
                                    check_forward_ad=True)

"""Lazy conjugate and negative bits: a conj/neg view holds its base's raw data, and every write
through it, deepcopy of it and view_as_complex/view_as_real of it is eager's."""
import copy

import pytest
import torch

import lazyxla

D = lazyxla.device()
Z = torch.tensor([1 + 2j, 3 - 1j])


def both(fn):
    """fn(z) on a CPU copy of Z and on a lazyxla one; z's values afterwards must agree."""
    z = Z.clone()
    fn(z)
    d = Z.to(D)
    fn(d)
    torch.testing.assert_close(d.cpu(), z)


# ------------------------------------------------------------- writes from the host into a view

@pytest.mark.parametrize("write", [
    lambda z: z.conj().copy_(torch.tensor([1j, 2 + 0j])),
    lambda z: z.conj().__setitem__(0, torch.tensor(1j)),
    lambda z: z.conj().imag.copy_(torch.tensor([5.0, 6.0])),
    lambda z: torch._neg_view(z).copy_(torch.tensor([1 + 1j, 2j])),
    lambda z: z.conj().copy_(torch.tensor([1 + 3j, 2j]).conj()),  # a conj source too
], ids=["copy_", "setitem", "imag_of_conj", "neg_view", "conj_source"])
def test_host_value_copied_into_a_view_is_stored_with_its_bits(write):
    both(write)


# --------------------------------------------- in-place ops PyTorch passes through the math bits

def _m(z, *shape):
    """A complex matrix of that shape on z's device (no alias of z)."""
    n = shape[0] * shape[1]
    return (torch.arange(n) + 1j * torch.arange(n, 0, -1)).to(z.dtype).reshape(shape).to(z.device)


@pytest.mark.parametrize("write", [
    lambda z: z.conj().conj_physical_(),
    lambda z: z.conj().imag.neg_(),
    lambda z: torch._neg_view(z).neg_(),
    lambda z: z.conj()[None].addmm_(_m(z, 1, 1), _m(z, 1, 2)),
    lambda z: z.conj()[None, None].baddbmm_(_m(z, 1, 1)[None], _m(z, 1, 2)[None]),
    lambda z: z.conj().mul_(2j),  # (resolved by PyTorch's fallback: it already worked)
], ids=["conj_physical_", "neg_of_imag", "neg_of_neg_view", "addmm_", "baddbmm_", "mul_"])
def test_inplace_op_on_a_conj_or_neg_view_writes_eagers_value(write):
    both(write)


def test_mm_into_a_conj_out_tensor_is_eagers():
    m = torch.tensor([[1 + 2j, 3j], [2 - 1j, 1 + 0j]])
    outs = []
    for dev in ("cpu", D):
        out = torch.zeros(2, 2, dtype=m.dtype, device=dev)
        torch.mm(m.to(dev), m.to(dev), out=out.conj())
        outs.append(out.cpu())
    torch.testing.assert_close(outs[1], outs[0])


# ----------------------------------------------------------------------------------- deepcopy

@pytest.mark.parametrize("view", [lambda z: z.conj(), lambda z: torch._neg_view(z),
                                  lambda z: z.conj().imag], ids=["conj", "neg", "imag_of_conj"])
def test_deepcopy_of_a_conj_or_neg_view_is_its_value(view):
    """As eager's: the copy holds the view's value (conj_physical / neg), with no bit."""
    c = copy.deepcopy(view(Z.to(D)))
    expected = copy.deepcopy(view(Z.clone()))
    assert (c.is_conj(), c.is_neg()) == (expected.is_conj(), expected.is_neg()) == (False, False)
    torch.testing.assert_close(c.cpu(), expected)


@pytest.mark.parametrize("view", [lambda z: z.real, torch.view_as_real, lambda z: z.imag,
                                  lambda z: z.detach(), lambda z: z[1:]],
                         ids=["real", "view_as_real", "imag", "detach", "slice"])
def test_deepcopy_keeps_tensors_of_one_storage_aliased_in_any_dtype(view):
    """Eager copies each storage once per deepcopy: a write to one copy is seen by the other."""
    for z in (Z.clone(), Z.to(D)):
        for order in (1, -1):  # the view copied first, or its base
            c = copy.deepcopy([z, view(z)][::order])[::order]
            c[1].fill_(9)
            expected = Z.clone()
            view(expected).fill_(9)
            torch.testing.assert_close(c[0].cpu(), expected)


def test_deepcopy_of_a_plain_tensor_is_a_plain_tensor():
    x = torch.arange(6.0).reshape(2, 3).to(D)
    c = copy.deepcopy([x, x])
    assert c[0] is c[1] and not c[0]._is_view() and c[0].stride() == (3, 1)
    torch.testing.assert_close(c[0].cpu(), x.cpu())


def test_deepcopy_keeps_a_tensors_python_attributes_deep_copied():
    # they were dropped (eager's deepcopy copies __dict__)
    for requires_grad in (False, True):
        x = torch.ones(3, device=D, requires_grad=requires_grad)
        x.tag, x.meta = "bar", {"k": [1]}
        c = copy.deepcopy(x)
        assert c.tag == "bar" and c.meta == {"k": [1]} and c.meta is not x.meta
        assert c.requires_grad == requires_grad


# --------------------------------------------------------------- view_as_complex / view_as_real

@pytest.mark.parametrize("make", [
    lambda d: torch.view_as_complex(torch.arange(5.0, device=d)[1:].view(2, 2)),
    lambda d: torch.view_as_complex(torch.arange(4.0, device=d).view(2, 2).t()),
    lambda d: torch.view_as_complex(torch.arange(9.0, device=d).view(3, 3)[:, :2]),
    lambda d: torch.view_as_complex(torch.arange(6.0, device=d).view(2, 3)),
    lambda d: torch.view_as_real(torch.tensor([1j], device=d).conj()),
], ids=["odd_storage_offset", "last_stride_2", "odd_stride", "last_dim_3", "real_of_conj"])
def test_view_as_complex_and_real_raise_eagers_errors(make):
    """Each after a view of the same shape and dtype that eager allows: meta inference is
    cached by shape and dtype, not strides, offset or bits."""
    torch.view_as_complex(torch.arange(6.0, device=D)[2:].view(2, 2))  # (offset 2: allowed)
    torch.view_as_real(torch.tensor([1j], device=D))
    with pytest.raises(RuntimeError) as eager:
        make("cpu")
    with pytest.raises(RuntimeError, match="^" + __import__("re").escape(str(eager.value)) + "$"):
        make(D)


def test_view_as_complex_at_an_even_offset_is_eagers_view():
    x = torch.arange(6.0)
    c = torch.view_as_complex(x.to(D)[2:].view(2, 2))
    e = torch.view_as_complex(x[2:].view(2, 2))
    assert (c.stride(), c.storage_offset()) == (e.stride(), e.storage_offset())
    torch.testing.assert_close(c.cpu(), e)


def test_a_tensor_with_both_lazy_bits_is_read_with_both():
    z = torch.tensor([1 + 2j])
    expected = torch._neg_view(z.conj()) * 1
    got = torch._neg_view(z.to("lazyxla").conj()) * 1
    torch.testing.assert_close(got.cpu(), expected)

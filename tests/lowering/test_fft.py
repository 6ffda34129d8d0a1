"""Differential tests of lazyxla/lowering/fft.py (_fft_r2c/_fft_c2c/_fft_c2r) and of lazy conj."""
import pytest
import torch

import lazyxla
from lazyxla.testing import check, check_grad

F = torch.fft
TOL = dict(atol=1e-4, rtol=1e-4)


def _r():
    return torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(0))


def _c():
    return torch.complex(_r(), _r().flip(0))


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_1d(norm):
    check(lambda x: [F.fft(x, norm=norm), F.ifft(x, n=5, norm=norm), F.rfft(x, norm=norm),
                     F.ihfft(x, norm=norm)], _r(), **TOL)
    check(lambda x: [F.fft(x, dim=1, norm=norm), F.ifft(x, norm=norm), F.irfft(x, norm=norm),
                     F.hfft(x, n=7, norm=norm)], _c(), **TOL)


def test_nd():
    check(lambda x: [F.fft2(x), F.rfftn(x), F.ifftn(x, dim=(0, 2)), F.ihfft2(x)], _r(), **TOL)
    check(lambda x: [F.fftn(x), F.irfft2(x), F.irfftn(x, s=(3, 5)), F.hfft2(x), F.hfftn(x)],
          _c(), **TOL)


def test_grad():
    check_grad(lambda x: F.rfft(x).abs(), _r(), **TOL)
    check_grad(lambda x: F.irfftn(F.fftn(x)), _r(), **TOL)


def test_conj_bit_is_resolved():
    check(lambda x: [torch.conj(x) * 1, torch.conj(x).clone(), torch.conj(x).resolve_conj()], _c())


@pytest.mark.parametrize("n,d", [(5, 0.1), (4, 1.0), (1, 1.0), (8, 0.25)])
def test_fftfreq_made_on_the_device_is_eagers(n, d):
    """ATen's fftfreq writes its negative half with arange into an empty slice of its result,
    which the out= write resizes within the result's storage (it went to a buffer of its own)."""
    dev = lazyxla.device()
    torch.testing.assert_close(torch.fft.fftfreq(n, d, device=dev).cpu(), torch.fft.fftfreq(n, d))
    torch.testing.assert_close(torch.fft.rfftfreq(n, d, device=dev).cpu(), torch.fft.rfftfreq(n, d))

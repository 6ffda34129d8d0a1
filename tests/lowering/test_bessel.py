"""Differential tests of lazyxla/lowering/bessel.py: J0, J1, Y0, Y1, K0, K1, scaled K0/K1 and Ai
against eager CPU over the whole real line (default torch.testing tolerances), with no CPU
fallback. One graph per function and dtype."""
import math

import pytest
import torch

from lazyxla.testing import check

S = torch.special
FNS = [S.bessel_j0, S.bessel_j1, S.bessel_y0, S.bessel_y1, S.modified_bessel_k0,
       S.modified_bessel_k1, S.scaled_modified_bessel_k0, S.scaled_modified_bessel_k1, S.airy_ai]

# Where the approximations change range (J/Y: 5, K: 2, Ai: +-2.09, and the 1e-5 of J0's series),
# where eager's Ai reaches 0 (103.892) and float32's exp overflows (Ai, K near 88..104).
_EDGES = [1e-5, 2.0, 5.0, 2.09, -2.09, 8.3203353, 103.892, 88.7, -5.0, -2.0]
_POINTS = [0.0, -0.0, 1e-6, -1e-6, 1e-30, -1e-30, 1e3, -1e3, 1e10, -1e10, 1e30, -1e30, 3e38, -3e38,
           # large negative x, where Ai's phase (2/3)|x|^1.5 is a rounded float
           -155.25576782226562, -164.45762634277344, -93970870.14239027, -112463799.88156824,
           math.inf, -math.inf, math.nan]


def _grid(dtype):
    g = torch.Generator().manual_seed(0)
    top = 38 if dtype == torch.float32 else 300
    parts = [torch.linspace(-30, 30, 6001, dtype=torch.float64),
             torch.logspace(-35, top, 600, dtype=torch.float64),
             -torch.logspace(-35, top, 600, dtype=torch.float64),
             torch.rand(3000, generator=g, dtype=torch.float64) * 400 - 200,
             torch.tensor(_POINTS, dtype=torch.float64)]
    parts += [e + torch.linspace(-1e-3, 1e-3, 41, dtype=torch.float64) for e in _EDGES]
    parts += [torch.tensor(_EDGES, dtype=torch.float64)]
    return torch.cat(parts).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("fn", FNS, ids=lambda f: f.__name__)
def test_real_line(fn, dtype):
    expected, actual = check(fn, _grid(dtype))
    # nan where eager has it (y, k below 0; everything at nan; j, y, ai at +-inf) and the same
    # infinities (y0/y1 -inf, k0/k1 +inf at 0): assert_close checks these too, made explicit here
    assert torch.equal(expected.isnan(), actual.isnan())
    assert torch.equal(expected.isinf(), actual.isinf())
    assert torch.equal(expected[expected.isinf()], actual[actual.isinf()])


@pytest.mark.parametrize("fn", [S.bessel_y0, S.airy_ai], ids=lambda f: f.__name__)
def test_integer_input(fn):
    # an int64 tensor computes in float32, as eager does (one shared path for all nine; bool
    # inputs are in the OpInfo sweep's full mode)
    expected, actual = check(fn, torch.arange(-3, 12))
    assert actual.dtype == torch.float32


def test_out_variant():
    x = torch.linspace(-8, 8, 33, dtype=torch.float64)

    def fn(t):
        out = torch.empty_like(t)
        S.bessel_y1(t, out=out)
        return out
    check(fn, x)

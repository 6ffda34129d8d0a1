"""Complex functions on their branch cuts follow eager (C99): the sign of a zero part picks the
side (XLA's sqrt/asin/acos/acosh/asinh took +0.0's side for both); |x| of a complex x with an
infinite part is inf; a complex value cast to a real dtype inside a reduction gives eager's
warning, not JAX's."""
import math
import subprocess
import sys

import pytest
import torch

import lazyxla

D = lazyxla.device()
_V = [-4.0, -1.0, -0.5, 0.5, 1.0, 4.0]
# both sides of the real axis (imag +-0.0) and of the imaginary axis (real +-0.0)
POINTS = ([complex(r, s * 0.0) for r in _V + [0.0, -0.0] for s in (1, -1)]
          + [complex(s * 0.0, i) for i in _V for s in (1, -1)])


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("fn", [torch.sqrt, torch.rsqrt, torch.log, torch.asin, torch.acos,
                                torch.atan, torch.asinh, torch.acosh, torch.atanh],
                         ids=lambda f: f.__name__)
def test_branch_cut_side_follows_the_sign_of_zero(fn, dtype):
    z = torch.tensor(POINTS, dtype=dtype)
    torch.testing.assert_close(fn(z.to(D)).cpu(), fn(z), equal_nan=True)


def test_real_inputs_are_unchanged():
    x = torch.tensor([-0.0, 0.0, 0.25, 4.0, -1.0])
    for fn in (torch.sqrt, torch.asin, torch.acos, torch.acosh, torch.asinh):
        torch.testing.assert_close(fn(x.to(D)).cpu(), fn(x), equal_nan=True)


def test_abs_of_an_infinite_part_is_inf_even_beside_nan():
    inf, nan = math.inf, math.nan
    for dtype in (torch.complex64, torch.complex128):
        z = torch.tensor([complex(nan, inf), complex(-inf, nan), complex(nan, -inf),
                          complex(nan, 1.0), complex(3.0, -4.0)], dtype=dtype)
        torch.testing.assert_close(z.to(D).abs().cpu(), z.abs(), equal_nan=True)


_WARNING_PROBE = """
import warnings, torch, lazyxla
z = torch.tensor([1 + 2j, 3 + 4j], device="lazyxla")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    values = [z.sum(dtype=torch.float32).item(), z.prod(dtype=torch.float32).item(),
              z.cumsum(0, dtype=torch.float64).tolist()]
    r = torch.zeros(2, device="lazyxla")
    r[0] = torch.tensor(1 + 1j)
    values += [r.tolist(), z.float().tolist(), torch.ones(2, device="lazyxla").copy_(z).tolist()]
print(values)
print(sorted({(x.category.__name__, str(x.message)) for x in w}))
"""


def test_complex_to_real_casts_warn_as_eager_once():
    """Eager: the imaginary part is dropped, with one UserWarning per process (reductions with a
    real dtype, copies and conversions; not JAX's ComplexWarning or deprecation warning)."""
    out = subprocess.run([sys.executable, "-c", _WARNING_PROBE], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "[4.0, 3.0, [1.0, 4.0], [1.0, 0.0], [1.0, 3.0], [1.0, 3.0]]"
    assert out[1] == str([("UserWarning", "Casting complex values to real discards the imaginary part")])

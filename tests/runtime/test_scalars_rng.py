"""Python scalars are runtime parameters; random ops draw from a device RNG whose seed is one."""
import torch

import lazyxla
from lazyxla import metrics


def test_changing_scalar_compiles_nothing_new(fresh_metrics):
    d = lazyxla.device()
    w = torch.ones(4, device=d)
    lazyxla.sync()
    compiles = None
    for step in range(50):
        lr = 0.1 / (step + 1)  # a schedule: a new float every step
        w.mul_(1 - lr).add_(lr * 0.5)
        lazyxla.sync()
        if step == 1:
            compiles = metrics.counter_value("UncachedCompile")
    assert metrics.counter_value("UncachedCompile") == compiles
    ref = torch.ones(4)
    for step in range(50):
        lr = 0.1 / (step + 1)
        ref.mul_(1 - lr).add_(lr * 0.5)
    torch.testing.assert_close(w.cpu(), ref)


def test_manual_seed_reproducible_and_fresh_per_step():
    d = lazyxla.device()
    torch.manual_seed(123)
    a1, a2 = torch.randn(16, device=d).cpu(), torch.randn(16, device=d).cpu()
    torch.manual_seed(123)
    b1, b2 = torch.randn(16, device=d).cpu(), torch.randn(16, device=d).cpu()
    torch.testing.assert_close(a1, b1)
    torch.testing.assert_close(a2, b2)
    assert not torch.equal(a1, a2)


def test_dropout_mask_changes_without_recompiling(fresh_metrics):
    d = lazyxla.device()
    x = torch.ones(67, device=d)  # (a length no other test's dropout uses: its compile is ours)
    lazyxla.sync()
    metrics.clear_counters()
    masks = []
    for _ in range(4):
        y = torch.nn.functional.dropout(x, p=0.5, training=True)
        lazyxla.sync()
        masks.append(y.cpu())
    assert metrics.counter_value("UncachedCompile") == 1
    assert len({tuple(m.tolist()) for m in masks}) == 4
    for m in masks:  # kept elements are scaled by 1/(1-p)
        assert set(m.unique().tolist()) <= {0.0, 2.0}


def test_scalars_of_every_kind_in_one_program_fed_by_position(fresh_metrics):
    # Runtime scalars are 0-dim arguments, their device arrays shared between equal values: each
    # must land in its own parameter, with its own dtype's rounding, and new values must not
    # recompile.
    d = lazyxla.device()
    xf = torch.linspace(-2, 2, 6, device=d)
    xi = torch.arange(6, device=d)
    xc = torch.full((6,), 1 + 1j, dtype=torch.complex64, device=d)
    lazyxla.sync()
    compiles = []

    def program(xf, xi, xc, s):
        f, g, i, j, b, c, t32, tb16, ti = s
        return (xf * f - g, xi * i + j, xf.clamp(min=g) if b else xf.clamp(max=g), xc * c,
                xf * t32 + tb16, xi + ti)

    for step in range(3):
        s = (0.5 + step, -0.25 * step, 3 + step, -7 - step, bool(step % 2), complex(step, -1),
             torch.tensor(1.1 + step, dtype=torch.float32),
             torch.tensor(0.3 + step, dtype=torch.bfloat16), torch.tensor(5 + step, dtype=torch.int32))
        got = program(xf, xi, xc, s)
        lazyxla.sync()
        compiles.append(metrics.counter_value("UncachedCompile"))
        want = program(xf.cpu(), xi.cpu(), xc.cpu(), s)
        for g_, w_ in zip(got, want):
            assert g_.dtype == w_.dtype
            torch.testing.assert_close(g_.cpu(), w_)
    # step 1 flips the bool (a static branch in Python: a second program); then no new compiles
    assert compiles[2] == compiles[1]


def test_equal_scalars_share_a_device_array_but_signed_zeros_and_dtypes_do_not():
    # A runtime scalar's device array is kept by value: -0.0 == 0.0 in Python, yet x * -0.0 is
    # -0.0 where x * 0.0 is 0.0, so the two must stay apart (as must a value's dtypes).
    import numpy as np
    from lazyxla import jaxenv
    from lazyxla.jaxenv import device_scalar
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert device_scalar(0.1, f32) is device_scalar(0.1, f32)
    assert device_scalar(0.1, f32) is not device_scalar(0.1, f64)
    assert np.asarray(device_scalar(0.1, f64)) == 0.1 and device_scalar(0.1, f64).dtype == f64
    assert np.signbit(device_scalar(-0.0, f64)) and not np.signbit(device_scalar(0.0, f64))
    assert np.isnan(device_scalar(float("nan"), f32))
    assert device_scalar(np.asarray(2.5), f32) == 2.5  # (an unhashable 0-dim array)
    with jaxenv.x64(True):  # 64-bit values whole, through JAX's fast transfer (present)
        assert np.asarray(device_scalar(2**62 + 1, np.dtype(np.int64))) == 2**62 + 1
    assert jaxenv._put is not None
    big = torch.tensor([2**40 + 1, -2**62 - 3])
    assert torch.equal(big.to(lazyxla.device()).cpu(), big)
    d = lazyxla.device()
    x = torch.ones(2, device=d)
    for s in (0.0, -0.0, 0.0, -0.0):
        got = (x * s).cpu()
        assert torch.equal(got.signbit(), (torch.ones(2) * s).signbit()), s

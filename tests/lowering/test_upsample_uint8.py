"""uint8 images resize as eager's integer kernel does, value for value, and the dtypes eager's
upsampling kernels refuse are refused with eager's error."""
import pytest
import torch
import torch.nn.functional as F

import lazyxla

D = lazyxla.device()
aten = torch.ops.aten


def _image(c, h, w, seed, saturated=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (2, c, h, w), dtype=torch.uint8, generator=g)
    return (x > 127).to(torch.uint8) * 255 if saturated else x  # hard edges: bicubic overshoots


# (mode, antialias, align_corners, channels, input (h, w), interpolate's size/scale arguments)
CASES = [
    ("bilinear", False, False, 3, (6, 7), dict(size=(9, 4))),
    ("bilinear", False, True, 1, (5, 8), dict(size=(11, 3))),
    ("bilinear", False, False, 4, (8, 8), dict(scale_factor=0.5)),
    ("bilinear", False, False, 5, (4, 6), dict(scale_factor=1.7)),
    ("bicubic", False, False, 3, (6, 7), dict(size=(13, 5))),
    ("bicubic", False, True, 5, (7, 5), dict(size=(3, 11))),
    ("bicubic", False, False, 1, (9, 9), dict(scale_factor=0.3, recompute_scale_factor=True)),
    ("bicubic", False, False, 3, (5, 5), dict(size=(5, 12))),  # one dim unchanged: no pass there
    ("bilinear", True, False, 3, (12, 10), dict(size=(5, 4))),
    ("bilinear", True, True, 5, (9, 6), dict(size=(4, 13))),
    ("bicubic", True, False, 3, (12, 10), dict(size=(5, 7))),
    ("bicubic", True, False, 4, (6, 11), dict(scale_factor=0.45)),
]


@pytest.mark.parametrize("saturated", [False, True], ids=["noise", "edges"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("mode,aa,align,c,hw,kw", CASES, ids=[f"{m}{'_aa' if a else ''}_{i}" for i, (m, a, *_)
                                                             in enumerate(CASES)])
def test_uint8_resize_equals_eager(mode, aa, align, c, hw, kw, channels_last, saturated):
    x = _image(c, *hw, seed=len(CASES) * c + hw[0], saturated=saturated)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    fn = lambda t: F.interpolate(t, mode=mode, antialias=aa, align_corners=align, **kw)  # noqa: E731
    expected = fn(x)
    got = fn(x.to(D)).cpu()
    assert got.dtype == torch.uint8
    torch.testing.assert_close(got, expected, atol=0, rtol=0)


def test_uint8_rounds_each_pass_not_once():
    """Eager clamps the first pass's bicubic overshoot to 0..255 before the second pass; rounding a
    float result once differs by tens of levels on hard edges."""
    x = _image(1, 6, 6, seed=3, saturated=True)
    once = F.interpolate(x.float(), size=(11, 11), mode="bicubic").round().clamp(0, 255)
    got = F.interpolate(x.to(D), size=(11, 11), mode="bicubic").cpu()
    assert (got.float() - once).abs().max() > 8
    torch.testing.assert_close(got, F.interpolate(x, size=(11, 11), mode="bicubic"), atol=0, rtol=0)


def test_uint8_one_output_column_is_interpolated():
    """Eager's CPU kernel, with more than 4 channels and one output column, repeats one pixel
    (off by up to ~200 from its own float result). lazyxla computes the interpolation."""
    x = _image(5, 2, 7, seed=1)
    ref = F.interpolate(x.float(), size=(7, 1), mode="bilinear")
    got = F.interpolate(x.to(D), size=(7, 1), mode="bilinear").cpu()
    assert (got.float() - ref).abs().max() <= 1


REFUSED = [
    (lambda x: aten.upsample_bilinear2d(x, [3, 3], False), 4, [torch.int32, torch.int8, torch.bool]),
    (lambda x: aten.upsample_bicubic2d(x, [3, 3], False), 4, [torch.int64, torch.complex64]),
    (lambda x: aten._upsample_bilinear2d_aa(x, [3, 3], False), 4, [torch.float16, torch.int16]),
    (lambda x: aten._upsample_bicubic2d_aa(x, [3, 3], False), 4, [torch.bfloat16]),
    (lambda x: aten.upsample_linear1d(x, [3], False), 3, [torch.uint8, torch.int32]),
    (lambda x: aten.upsample_trilinear3d(x, [3, 3, 3], False), 5, [torch.uint8]),
    (lambda x: aten.upsample_nearest1d(x, [3]), 3, [torch.int32]),
    (lambda x: aten.upsample_nearest2d(x, [3, 3]), 4, [torch.int64, torch.bool]),
    (lambda x: aten._upsample_nearest_exact2d(x, [3, 3]), 4, [torch.int8]),
    (lambda x: aten.upsample_nearest3d(x, [3, 3, 3]), 5, [torch.int16]),
]


@pytest.mark.parametrize("fn,ndim,dtypes", REFUSED, ids=[str(i) for i in range(len(REFUSED))])
def test_dtypes_eager_refuses_are_refused(fn, ndim, dtypes):
    for dt in dtypes:
        x = torch.zeros((1, 2) + (2,) * (ndim - 2), dtype=dt)
        with pytest.raises(NotImplementedError) as cpu:
            fn(x)
        with pytest.raises(NotImplementedError, match=str(cpu.value).replace("(", r"\(")):
            fn(x.to(D))

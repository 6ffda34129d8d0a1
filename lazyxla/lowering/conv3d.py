"""3-d convolutions on XLA's CPU backend as sums of 2-d ones.

XLA's CPU runtime has fast 2-d convolutions (YNNPACK, Eigen) but computes 3-d ones far slower:
a 32->32-channel 3x3x3 convolution over 8x32x32 at batch 4 took 84 ms forward and 210 ms for its
three gradients, against eager's 11 and 23. A 3-d convolution is the sum over its depth taps of
2-d convolutions: tap t reads the input's depth slices d*stride - padding + t*dilation, which
fold into the batch of a 2-d convolution with the tap's (kh, kw) slice of the weight. So lowered,
that layer took 16 and 40 ms (`benchmarks/convolutions.py`). Its gradients are the VJP of this
form, 2-d convolutions too (the weight's over batch chunks: conv_grad.py). Float32 and float64
on the CPU backend; transposed 3-d convolutions, half precision and other backends keep XLA's
3-d convolution."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def applies(x, nd: int, transposed: bool) -> bool:
    """float32 and float64 (float16/bfloat16 keep one convolution: its one rounding)."""
    return (nd == 3 and not transposed and x.dtype in (jnp.float32, jnp.float64)
            and jax.default_backend() == "cpu")


def conv3d_by_depth_taps(x, w, stride, padding, dilation, groups, precision, acc):
    """lax.conv_general_dilated(x, w, stride, symmetric padding, rhs_dilation=dilation,
    feature_group_count=groups, preferred_element_type=acc) for NCDHW x and OIDHW w."""
    n, c, depth = x.shape[:3]
    o, kd = w.shape[0], w.shape[2]
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = stride, padding, dilation
    out_depth = (depth + 2 * pd - dd * (kd - 1) - 1) // sd + 1
    if out_depth <= 0 or n == 0:  # nothing to sum: XLA's own convolution gives the empty shape
        return lax.conv_general_dilated(x, w, stride, [(p, p) for p in padding], rhs_dilation=dilation,
                                        feature_group_count=groups, precision=precision,
                                        preferred_element_type=acc)
    xp = jnp.pad(x, ((0, 0), (0, 0), (pd, pd), (0, 0), (0, 0)))
    total = None
    for t in range(kd):
        start = t * dd
        taps = lax.slice_in_dim(xp, start, start + (out_depth - 1) * sd + 1, sd, axis=2)
        planes = jnp.moveaxis(taps, 2, 1).reshape((n * out_depth, c) + x.shape[3:])
        y = lax.conv_general_dilated(planes, w[:, :, t], (sh, sw), [(ph, ph), (pw, pw)],
                                     rhs_dilation=(dh, dw), feature_group_count=groups,
                                     precision=precision, preferred_element_type=acc)
        total = y if total is None else total + y
    return jnp.moveaxis(total.reshape((n, out_depth, o) + total.shape[2:]), 1, 2)

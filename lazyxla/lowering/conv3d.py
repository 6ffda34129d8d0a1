"""3-d convolutions on XLA's CPU backend as sums of 2-d ones.

XLA's CPU runtime has fast 2-d convolutions (YNNPACK, Eigen) but computes 3-d ones far slower:
a 32->32-channel 3x3x3 convolution over 8x32x32 at batch 4 took 87 ms forward and 217 ms for its
three gradients, against eager's 11 and 25. A 3-d convolution is the sum over its depth taps of
2-d convolutions: tap t reads the input's depth slices d*stride - padding + t*dilation, which
fold into the batch of a 2-d convolution with the tap's (kh, kw) slice of the weight. So lowered,
that layer took 16 and 43 ms (`benchmarks/convolutions.py`). Its gradients are the VJP of this
form, 2-d convolutions too (the weight's over batch chunks: conv_grad.py); a tap whose 2-d
kernel is 1x1 (a temporal kernel, 3x1x1) is a matrix product, as is its weight gradient. Float32
and float64 on the CPU backend; transposed 3-d convolutions, 1x1x1 kernels, half precision and
other backends keep XLA's 3-d convolution."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def applies(x, w, nd: int, transposed: bool) -> bool:
    """float32 and float64 (float16/bfloat16 keep one convolution: its one rounding); a 1x1x1
    kernel keeps XLA's convolution, which computes it as fast."""
    return (nd == 3 and not transposed and x.dtype in (jnp.float32, jnp.float64)
            and any(k != 1 for k in w.shape[2:]) and jax.default_backend() == "cpu")


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
    pointwise = w.shape[3:] == (1, 1) and ph == pw == 0 and groups == 1
    xp = jnp.pad(x, ((0, 0), (0, 0), (pd, pd), (0, 0), (0, 0)))
    total = None
    for t in range(kd):
        start = t * dd
        taps = lax.slice_in_dim(xp, start, start + (out_depth - 1) * sd + 1, sd, axis=2)
        planes = jnp.moveaxis(taps, 2, 1).reshape((n * out_depth, c) + x.shape[3:])
        if pointwise:  # a 1x1 tap (a temporal kernel, 3x1x1): a matrix product, and so is its
            # weight gradient (as a 1x1 convolution that took 3-8x longer: conv_grad.py)
            y = jnp.einsum("oc,nchw->nohw", w[:, :, t, 0, 0], planes[:, :, ::sh, ::sw],
                           precision=precision, preferred_element_type=acc)
        else:
            y = lax.conv_general_dilated(planes, w[:, :, t], (sh, sw), [(ph, ph), (pw, pw)],
                                         rhs_dilation=(dh, dw), feature_group_count=groups,
                                         precision=precision, preferred_element_type=acc)
        total = y if total is None else total + y
    return jnp.moveaxis(total.reshape((n, out_depth, o) + total.shape[2:]), 1, 2)

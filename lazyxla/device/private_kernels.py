"""Direct kernels for ops whose lowering is registered under a private name (`lazyxla::...`).

Such a lowering gets no generic kernel (kernels.register_all registers aten overloads only), so the
aten op is given one here, which records the private lowering and adjusts what the generic path
could not:
  bernoulli.p, bernoulli_.float  the dispatcher drops bernoulli_'s default p=0.5 and bernoulli.p
                                 has no default, so the generic in-place path cannot call it
  multi_margin_loss,             with reduction='none' on a 1-d or 0-d input PyTorch's CPU kernel
  multilabel_margin_loss_forward gives a 0-d loss, its meta kernel (hence the lowering) shape (1,)
"""
from __future__ import annotations

import torch

from lazyxla.lowering.registry import LOWERINGS
from . import dispatch

aten = torch.ops.aten
_libs = []


def _bernoulli_p(x, p=0.5, *, generator=None):
    return dispatch.record(aten.bernoulli.p, LOWERINGS["lazyxla::bernoulli.p"], (x, p),
                           {} if generator is None else {"generator": generator})


def _bernoulli_inplace(x, p=0.5, *, generator=None):
    with torch.no_grad():
        x.copy_(aten.bernoulli.p(x, p, generator=generator))
    return x


def _zero_dim_none(op, name, reduction_pos):
    low = LOWERINGS[name]

    def kernel(*args, **kwargs):
        out = dispatch.record(op, low, args, kwargs)
        reduction = args[reduction_pos] if len(args) > reduction_pos else kwargs.get("reduction", 1)
        if args[0].dim() <= 1 and reduction == 0:
            if isinstance(out, (tuple, list)):
                return (out[0].reshape(()), *out[1:])
            return out.reshape(())
        return out
    return kernel


def install() -> None:
    lib = torch.library.Library("aten", "IMPL")
    _libs.append(lib)
    lib.impl("bernoulli.p", _bernoulli_p, "PrivateUse1")
    lib.impl("bernoulli_.float", _bernoulli_inplace, "PrivateUse1")
    lib.impl("multi_margin_loss",
             _zero_dim_none(aten.multi_margin_loss.default, "lazyxla::multi_margin_loss", 5),
             "PrivateUse1")
    lib.impl("multilabel_margin_loss_forward",
             _zero_dim_none(aten.multilabel_margin_loss_forward.default,
                            "lazyxla::multilabel_margin_loss_forward", 2), "PrivateUse1")

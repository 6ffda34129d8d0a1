"""copy.deepcopy, pickle and torch.save of lazyxla tensors.

PyTorch copies and pickles a tensor through its storage unless the device is one it knows has no
host-addressable storage (xla, lazy, ...) or a PrivateUse1 tensor without a storage. A lazyxla
tensor keeps its state on a data-less storage, so those paths would clone or serialize nothing
(deepcopy crashed the process; pickling failed). For lazyxla tensors, as PyTorch does for xla:
deepcopy is a clone (a view: the same view of its base's copy, so a base and its views copied
together still alias), and pickling goes through a CPU copy that loads back onto the saved device
(map_location applies; a view saved with its base is saved as a copy of its own)."""
from __future__ import annotations

import functools

import torch

from lazyxla.ir import buffer as buf

_installed = False


def _deepcopy(original):
    @functools.wraps(original)
    def __deepcopy__(self, memo):
        if self.device.type != "lazyxla" or type(self) is not torch.Tensor or not self.is_leaf:
            return original(self, memo)  # (non-leaves: PyTorch's own error)
        if id(self) in memo:
            return memo[id(self)]
        base = _root_base(self)
        with torch.no_grad():
            if base is not None:  # a view: a view of its base's copy, so copies alias as originals do
                new = base.__deepcopy__(memo).as_strided(self.size(), self.stride(), self.storage_offset())
            else:
                new = self.clone()
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new
    return __deepcopy__


def _root_base(t):
    """The lazyxla base `t` is a view of (as_strided of it rebuilds `t`), or None."""
    base = t._base if t._is_view() else None
    if base is None or base.device.type != "lazyxla" or base.dtype != t.dtype or type(base) is not torch.Tensor:
        return None
    return base if type(buf.state_of(base)) is buf.Buffer else None


def _reduce(original):
    @functools.wraps(original)
    def _reduce_ex_internal(self, proto):
        if self.device.type != "lazyxla":
            return original(self, proto)
        if torch.serialization._serialization_tls.skip_data:
            raise RuntimeError("Cannot serialize lazyxla tensors under the skip_data context manager")
        return (torch._utils._rebuild_device_tensor_from_cpu_tensor,
                (self.detach().cpu(), self.dtype, str(self.device), self.requires_grad))
    return _reduce_ex_internal


def install() -> None:
    global _installed
    if _installed:
        return
    torch.Tensor.__deepcopy__ = _deepcopy(torch.Tensor.__deepcopy__)
    torch.Tensor._reduce_ex_internal = _reduce(torch.Tensor._reduce_ex_internal)
    _installed = True

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
from . import dispatch, fallback

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


def _restore_location(storage, location):
    """torch.load's step for each saved storage whose map_location names lazyxla: its bytes move
    to the device as one buffer (PyTorch's own step allocates a device storage, which a Python
    backend cannot). The tensors rebuilt on it (set_) view it in their dtypes."""
    if not isinstance(location, str) or not location.startswith("lazyxla"):
        return None
    dispatch.check_device_index(torch.device(location))
    if storage.device.type != "cpu":
        storage = storage.cpu()
    data = torch.empty(0, dtype=torch.uint8).set_(storage)  # the storage's bytes, not copied
    state = buf.state_of(fallback.from_cpu(data))
    # torch.load reuses a restored storage for the next tensor on it only if its data pointer is
    # not null: this one points at the host bytes it was loaded from (kept alive with it, never
    # written), so that tensors saved on one storage share one buffer again.
    out = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), torch.device("lazyxla"),
                                                        storage.nbytes())
    out._lazyxla_host_bytes = storage
    return buf.attach_storage(out, state)


def install() -> None:
    global _installed
    if _installed:
        return
    torch.Tensor.__deepcopy__ = _deepcopy(torch.Tensor.__deepcopy__)
    torch.Tensor._reduce_ex_internal = _reduce(torch.Tensor._reduce_ex_internal)
    # before PyTorch's PrivateUse1 step (priority 23); None for every other location
    torch.serialization.register_package(11, lambda obj: None, _restore_location)
    _installed = True

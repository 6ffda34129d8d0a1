"""copy.deepcopy, pickle and torch.save of lazyxla tensors.

PyTorch copies and pickles a tensor through its storage unless the device is one it knows has no
host-addressable storage (xla, lazy, ...) or a PrivateUse1 tensor without a storage. A lazyxla
tensor keeps its state on a data-less storage, so those paths would clone or serialize nothing
(deepcopy crashed the process; pickling failed). For lazyxla tensors, deepcopy copies each
buffer once, as eager copies each storage once: tensors on one buffer (a base, its views in any
dtype, a detach) copied together still alias. torch.save and pickle save a tensor as eager saves
a device tensor: on its buffer's storage, in eager's memory order, with its offset and strides,
tagged with the device it loads back onto (map_location applies). Tensors on one buffer (a base and its views) are saved on
one storage, as in eager, so they load sharing one buffer (or one CPU storage) again."""
from __future__ import annotations

import copy
import functools
import math
import threading
import weakref

import torch

from lazyxla.ir import buffer as buf
from . import dispatch, fallback, storages

_installed = False


def _deepcopy(original):
    @functools.wraps(original)
    def __deepcopy__(self, memo):
        if self.device.type != "lazyxla" or type(self) is not torch.Tensor or not self.is_leaf:
            return original(self, memo)  # (non-leaves: PyTorch's own error)
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = _copy_on_root(self, memo)
            # as eager's: a conj/neg view copies as its value, a tensor of its own
            if self.is_conj():
                new = new.conj_physical()
            if self.is_neg():
                new = new.neg()
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        if self.__dict__:  # (its Python attributes, deep-copied, as eager's deepcopy keeps them)
            new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new
    return __deepcopy__


def _copy_on_root(t, memo):
    """t's raw data on the copy of its root buffer, made once per deepcopy (as eager copies each
    storage once, in the memo): tensors on one buffer (a base, its views, `x.real`,
    `view_as_real(x)`, `x.detach()`) are copied onto one new buffer, so they alias as the originals
    do. The first tensor that is its whole root gets that root's copy (a plain buffer, not a
    view); the others view it in their own dtype, strides and offset (set_, as eager's)."""
    root = buf.state_of(t).root
    key = (_MEMO_TAG, id(root))
    held = memo.get(key)
    if held is None:
        shape, dtype, layout = tuple(root.node.shape), root.node.dtype, root.layout
        whole = buf.new_tensor(root, shape, dtype) if layout is None else \
            buf.new_strided_tensor(root, shape, dtype, layout, 0, math.prod(shape))
        held = memo[key] = [root, whole.clone(), False]  # (root held: its id stays its own)
    copied = held[1]
    if t.dtype == copied.dtype and t.shape == copied.shape and t.stride() == copied.stride() \
            and t.storage_offset() == 0:
        if held[2]:
            return copied.detach()  # another tensor of the same storage
        held[2] = True
        return copied
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(
        copied.untyped_storage(), t.storage_offset(), t.size(), t.stride())


_MEMO_TAG = "lazyxla root buffer"


# id(root Buffer) -> the CPU storage a save holds for it (the storage holds the root, so the id
# stays its own): every tensor on that buffer in one save is saved on this one storage.
_SAVED = weakref.WeakValueDictionary()


def _saved_storage(root, location: str, skip_data: bool):
    """A CPU storage of root's bytes in eager's memory order, tagged to load onto `location`."""
    saved = _SAVED.get(id(root))
    if saved is not None and saved._lazyxla_root is root and saved._lazyxla_node is root.node:
        return saved
    if skip_data:  # torch.serialization.skip_data writes sizes, not bytes: nothing to read
        saved = torch.UntypedStorage(math.prod(root.node.shape) * root.node.dtype.itemsize)
    else:
        with torch.no_grad():
            saved = storages.host_bytes(root)
    saved._lazyxla_location, saved._lazyxla_root, saved._lazyxla_node = location, root, root.node
    _SAVED[id(root)] = saved
    return saved


def _saved_location(storage):
    """torch.save's location tag of a storage: lazyxla's for the CPU copies made above."""
    return getattr(storage, "_lazyxla_location", None)


class _Copying(threading.local):
    on = False


_COPYING = _Copying()


def _copy(self):
    """copy.copy: a new tensor on the same storage, as eager's, through the tensor's own reduction
    (as copy.copy's default), which for a lazyxla tensor is eager's reduction on its storage, not
    torch.save's (a CPU copy of the buffer: the copy was a CPU tensor on the save's cached bytes)."""
    if self.device.type != "lazyxla":
        return copy._reconstruct(self, None, *self.__reduce_ex__(4))
    _COPYING.on = True
    try:
        reduced = self.__reduce_ex__(4)
    finally:
        _COPYING.on = False
    return copy._reconstruct(self, None, *reduced)


def _reduce(original):
    @functools.wraps(original)
    def _reduce_ex_internal(self, proto):
        if self.device.type != "lazyxla" or _COPYING.on:
            return original(self, proto)
        from torch.utils.hooks import warn_if_has_hooks
        warn_if_has_hooks(self)
        storage = _saved_storage(buf.state_of(self).root, str(self.device),
                                 torch.serialization._serialization_tls.skip_data)
        # eager's own reduction, run on a CPU stand-in with self's geometry on that storage
        stand_in = torch.empty(0, dtype=self.dtype).set_(storage, self.storage_offset(), self.size(),
                                                         self.stride())
        if self.is_conj():
            stand_in = stand_in.conj()
        if self.is_neg():
            stand_in = stand_in._neg_view()
        if self.requires_grad:
            stand_in.requires_grad_()
        return original(stand_in, proto)
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
    out = storage_from_host(storage)
    if getattr(storage, "_torch_load_uninitialized", False):
        # The legacy (non-zip) format, which pickle uses too, reads the bytes after this step,
        # into the storage returned: on the host, and then they become the buffer's value.
        def _set_from_file(*args):
            storage._set_from_file(*args)
            data = torch.empty(0, dtype=torch.uint8).set_(storage)
            buf.storage_state(out).write(buf.state_of(fallback.from_cpu(data)).read())
            return out
        out._set_from_file = _set_from_file
    return out


def storage_from_host(storage):
    """A lazyxla storage whose buffer holds a copy of CPU storage `storage`'s bytes. torch.load
    reuses a restored storage for the next tensor on it only if its data pointer is not null:
    a lazyxla storage's data_ptr() is its buffer's identity (storages.py), so tensors saved on
    one storage share one buffer again, and the host bytes are not kept."""
    data = torch.empty(0, dtype=torch.uint8).set_(storage)  # the storage's bytes, not copied
    state = buf.state_of(fallback.from_cpu(data))
    out = torch._C._construct_storage_from_data_pointer(0, torch.device("lazyxla"), storage.nbytes())
    return buf.attach_storage(out, state)


_STORAGE_NEW = torch.UntypedStorage.__new__


def _storage_new(cls, *args, **kwargs):
    """torch.UntypedStorage(..., device="lazyxla") crashed the process (PyTorch asks the device
    for an allocator, which a Python-registered device has none of). It is made on the host and
    becomes one device buffer; DataLoader workers that collate lazyxla tensors make theirs so."""
    device = kwargs.get("device")
    if device is None or torch.device(device).type != "lazyxla":
        return _STORAGE_NEW(cls, *args, **kwargs)
    dispatch.check_device_index(torch.device(kwargs.pop("device")))
    return storage_from_host(_STORAGE_NEW(cls, *args, **kwargs))


def rebuild_sent_tensor(data, dtype: torch.dtype, shape, device: str, requires_grad: bool,
                        parameter: bool):
    """A lazyxla tensor sent to another process (torch.multiprocessing), on arrival: `data` is
    its value's bytes (a numpy array)."""
    t = torch.from_numpy(data).view(dtype).reshape(shape).to(device)
    if parameter:
        return torch.nn.Parameter(t, requires_grad)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _multiprocessing_reducer(original):
    """torch.multiprocessing shares a tensor's storage with the receiving process; a lazyxla
    storage holds no memory to share (the worker crashed). A lazyxla tensor travels as a copy of
    its value's bytes and is moved to the device on arrival. Not as a shared CPU copy: that copy
    is a temporary, and a spawned process is handed its file descriptor by number once the
    parent has pickled everything, by when the copy is freed and the descriptor closed (the
    child died: "unable to resize file")."""
    @functools.wraps(original)
    def reduce(t):
        if t.device.type != "lazyxla":
            return original(t)
        with torch.no_grad():
            host = t.detach().cpu().contiguous()
        data = host.reshape(-1).view(torch.uint8).numpy()  # (any dtype, numpy's or not)
        return (rebuild_sent_tensor, (data, host.dtype, tuple(host.shape), str(t.device),
                                      t.requires_grad, isinstance(t, torch.nn.Parameter)))
    return reduce


def _install_multiprocessing() -> None:
    from multiprocessing.reduction import ForkingPickler
    import torch.multiprocessing  # noqa: F401  (registers PyTorch's reducers)
    for cls in (torch.Tensor, torch.nn.Parameter):
        original = ForkingPickler._extra_reducers.get(cls)
        if original is not None:
            ForkingPickler.register(cls, _multiprocessing_reducer(original))


def install() -> None:
    global _installed
    if _installed:
        return
    torch.Tensor.__deepcopy__ = _deepcopy(torch.Tensor.__deepcopy__)
    torch.Tensor._reduce_ex_internal = _reduce(torch.Tensor._reduce_ex_internal)
    torch.Tensor.__copy__ = _copy
    # before the CPU's tagger (priority 10), which would tag the saved copies "cpu"; None for
    # every other storage and location
    torch.serialization.register_package(9, _saved_location, _restore_location)
    _install_multiprocessing()
    torch.UntypedStorage.__new__ = staticmethod(_storage_new)
    _installed = True

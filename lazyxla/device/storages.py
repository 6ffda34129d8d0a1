"""Storage-level access to lazyxla tensors: identity, size, reads and writes.

A lazyxla storage holds no memory: its data is a device buffer or pending IR, kept on the storage
object. PyTorch's C++ storage methods therefore saw 0 bytes: every root storage reported data
pointer 0 and size 0 (Hugging Face's `save_pretrained` took all weights for one shared tensor and
refused to save), `tolist()` returned [] and `cpu()` raised. For storages that carry lazyxla state,
UntypedStorage's methods answer from the buffer:
- identity: `data_ptr()` is the buffer's, the same for a base and its views, distinct between
  buffers and stable while the buffer lives (an identity, not an address: nothing can be read
  through it). A tensor's `data_ptr()` (from Python) is its storage's plus its offset's bytes, as
  eager's; in C++ it stays 0 plus the offset's bytes.
- size: `nbytes()`/`size()`/`len()` are the buffer's bytes.
- reads (`cpu()`, `tolist()`, indexing, printing) copy the buffer's bytes to the host once, in
  eager's memory order; writes (`copy_`, `fill_`, item assignment) go through a byte view of the
  buffer, so every tensor on it sees them.
Every other storage keeps PyTorch's own methods. Giving storages real pointers instead would cost
about 3 us per recorded op (README, storage identity)."""
from __future__ import annotations

import math

import torch

from lazyxla.ir import buffer as buf

_UNTYPED = torch.UntypedStorage
_originals: dict = {}


def _state(storage):
    return buf.storage_state(storage, None)


def _bytes(storage) -> torch.Tensor:
    """A uint8 tensor over all of a storage's bytes: for a lazyxla one, a view of its buffer in
    eager's memory order."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _host(storage) -> torch.UntypedStorage:
    """A CPU copy of a lazyxla storage's bytes."""
    with torch.no_grad():
        return host_bytes(_state(storage).root)


def host_bytes(root) -> torch.UntypedStorage:
    """A CPU copy of a root buffer's bytes in eager's memory order. Where the root has no layout
    of its own its value is in that order: the copy is its data's (a byte view of it was a
    program per call: torch.save compiled one per tensor saved)."""
    if root.layout is None:
        return buf.new_tensor(root, root.node.shape, root.node.dtype).cpu().untyped_storage()
    flat = buf.new_tensor(root, root.node.shape, root.node.dtype)
    return flat.as_strided((flat.numel(),), (1,)).cpu().untyped_storage()


def nbytes(self) -> int:
    st = _state(self)
    if st is None:
        return _originals["nbytes"](self)
    node = st.root.node
    return math.prod(node.shape) * node.dtype.itemsize


def data_ptr(self) -> int:
    st = _state(self)
    if st is None:
        return _originals["data_ptr"](self)
    return id(st.root)  # the Buffer object lives as long as any tensor or storage on it


def tensor_data_ptr(self) -> int:
    """A lazyxla tensor's data_ptr(): its storage's plus its offset's bytes, as eager's tensors
    relate the two (torch.export's weight packager takes a tensor whose pointer is not its
    storage's for a slice, and rebuilt every weight with a size from their difference)."""
    if self.is_cpu:  # (the common caller's: one attribute before PyTorch's answer)
        return _tensor_data_ptr(self)
    st = _state(self.untyped_storage()) if self.device.type == "lazyxla" else None
    if st is None:
        return _tensor_data_ptr(self)
    return id(st.root) + self.storage_offset() * self.element_size()


_tensor_data_ptr = torch.Tensor.data_ptr


def __len__(self) -> int:
    return nbytes(self) if _state(self) is not None else _originals["__len__"](self)


def __getitem__(self, *args, **kwargs):
    if _state(self) is None:
        return _originals["__getitem__"](self, *args, **kwargs)
    (idx,) = args
    if isinstance(idx, slice):
        raise NotImplementedError("lazyxla: slicing a storage (storage[a:b]) is not supported; "
                                  "slice a tensor on it instead")
    return _host(self)[idx]


def __setitem__(self, *args, **kwargs):
    if _state(self) is None:
        return _originals["__setitem__"](self, *args, **kwargs)
    idx, value = args
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"can only set storage content with a int types, but got "
                        f"{type(value).__name__} instead")
    with torch.no_grad():
        _bytes(self)[idx] = value


def copy_(self, src, non_blocking=None):
    if isinstance(src, torch.TypedStorage):
        src = src._untyped_storage
    if _state(self) is None and _state(src) is None:
        return _originals["copy_"](self, src, non_blocking)
    dst, source = _bytes(self), _bytes(src)
    if dst.numel() != source.numel():
        raise RuntimeError(f"size does not match, self was {dst.numel()} bytes but src was "
                           f"{source.numel()} bytes")
    with torch.no_grad():
        dst.copy_(source)
    return self


def resize_(self, size):
    if _state(self) is None:
        return _originals["resize_"](self, size)
    if size != nbytes(self):
        raise RuntimeError("lazyxla: a storage cannot be resized (a device buffer has a fixed "
                           "size); resize the tensor instead (t.resize_)")
    return self


def cpu(self):
    return _host(self) if _state(self) is not None else _originals["cpu"](self)


def clone(self):
    if _state(self) is None:
        return _originals["clone"](self)
    with torch.no_grad():
        return _bytes(self).clone().untyped_storage()


def tolist(self):
    return _host(self).tolist() if _state(self) is not None else _originals["tolist"](self)


def _write_file(self, *args):
    """torch.save's legacy format (and pickling a TypedStorage) writes each storage with it. The
    C++ method copies a device storage to the host through a tensor whose storage object is not
    this one, so it lost the lazyxla state on the way (AttributeError)."""
    return _originals["_write_file"](_host(self) if _state(self) is not None else self, *args)


def __iter__(self):
    return iter(tolist(self)) if _state(self) is not None else _originals["__iter__"](self)


def __repr__(self):
    if _state(self) is None:
        return _originals["__repr__"](self)
    values = tolist(self)
    return (" " + "\n ".join(str(v) for v in values) + "\n"
            f"[{torch.typename(self)}(device={self.device}) of size {len(values)}]")


_METHODS = {"nbytes": nbytes, "data_ptr": data_ptr, "__len__": __len__, "__getitem__": __getitem__,
            "__setitem__": __setitem__, "copy_": copy_, "resize_": resize_, "cpu": cpu,
            "clone": clone, "tolist": tolist, "__iter__": __iter__, "__repr__": __repr__,
            "_write_file": _write_file}


def _storage_numel(t) -> int:
    return nbytes(t.untyped_storage()) // t.element_size()


def _new_zeros_with_same_feature_meta(self, other, *, self_num_batch_dims=0):
    """Zeros laid out as `other` in a storage of its size, with self's leading batch dims: the
    tangent forward AD gives a primal whose tangent has another layout (an expanded tangent, a
    dual written into a view). ATen's kernel sizes it from the C++ storage, which has 0 bytes."""
    numel = _storage_numel(other)
    batch = list(self.shape[:self_num_batch_dims])
    batch_strides = []
    for size in reversed(batch):  # each batch slice one whole storage of other, contiguously
        batch_strides.insert(0, numel)
        numel *= size
    zeros = torch.zeros(numel, dtype=other.dtype, device=other.device)
    return zeros.as_strided(batch + list(other.shape), batch_strides + list(other.stride()),
                            other.storage_offset())


def _has_same_storage_numel(base, other) -> bool:
    return _storage_numel(base) == _storage_numel(other)


_libs = []


def _typed_on_host(original):
    """TypedStorage reads one element per device read (and a program per index); for lazyxla,
    one host copy answers the whole read."""
    def method(self, *args):
        if self._untyped_storage.device.type != "lazyxla":
            return original(self, *args)
        return original(self.cpu(), *args)
    method.__name__ = original.__name__
    return method


def install() -> None:
    if _originals:
        return
    for name, method in _METHODS.items():
        _originals[name] = getattr(_UNTYPED, name)
        setattr(_UNTYPED, name, method)
    torch.Tensor.data_ptr = tensor_data_ptr
    lib = torch.library.Library("aten", "IMPL")
    _libs.append(lib)
    lib.impl("_new_zeros_with_same_feature_meta", _new_zeros_with_same_feature_meta, "PrivateUse1")
    lib.impl("_has_same_storage_numel", _has_same_storage_numel, "PrivateUse1")
    typed = torch.TypedStorage
    for name in ("_getitem", "__iter__", "tolist"):
        setattr(typed, name, _typed_on_host(getattr(typed, name)))

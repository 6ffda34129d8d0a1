"""Eager's argument errors for the matrix products (mm, addmm, mv, addmv, bmm, baddbmm, addbmm,
dot, vdot; their out= and in-place forms), in the order and words of its CPU kernels. PyTorch's
meta kernels word them otherwise
("a and b must have same reduction dim, but got [10, 16] X [8, 16]." where eager says "mat1 and
mat2 shapes cannot be multiplied (10x16 and 8x16)", the error of a mis-sized nn.Linear) or check
dtypes before shapes. A 0-dim CPU tensor (a wrapped scalar, which any device accepts) is exempt
from the dtype checks."""
from __future__ import annotations

import torch

from lazyxla.jaxenv import cpp_type_name, type_name
from .checks import check, fail

aten = torch.ops.aten


def _scalar(t) -> bool:
    return t.dim() == 0 and t.device.type == "cpu"


def _differ(a, b) -> bool:
    return a.dtype != b.dtype and not _scalar(a) and not _scalar(b)


def _matrix(t, message):
    if t.dim() != 2:
        fail(message)


def _multipliable(a, b):
    if a.shape[1] != b.shape[0]:
        fail(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
             f"{b.shape[0]}x{b.shape[1]})")


def _size(t, dim):
    return torch.empty(t.shape, device="meta").size(dim)


def _expandable(t, shape):
    """Eager's error where `t` does not expand to `shape` (addmm's self)."""
    torch.zeros((), dtype=t.dtype).expand(t.shape).expand(shape)


@check(aten.mm.default, aten.mm.out)
def _mm(a, b):
    _matrix(a, "self must be a matrix")
    _matrix(b, "mat2 must be a matrix")
    _multipliable(a, b)
    if a.dtype != b.dtype:
        fail(f"expected m1 and m2 to have the same dtype, but got: {cpp_type_name(a.dtype)} != "
             f"{cpp_type_name(b.dtype)}")


@check(aten.addmm.default, aten.addmm.out, aten.addmm_.default)
def _addmm(self, a, b, beta=1, alpha=1):
    if _differ(self, b):
        fail(f"self and mat2 must have the same dtype, but got {type_name(self.dtype)} and "
             f"{type_name(b.dtype)}")
    if a.dtype != b.dtype:
        fail(f"mat1 and mat2 must have the same dtype, but got {type_name(a.dtype)} and "
             f"{type_name(b.dtype)}")
    _matrix(a, f"mat1 must be a matrix, got {a.dim()}-D tensor")
    _matrix(b, f"mat2 must be a matrix, got {b.dim()}-D tensor")
    _multipliable(a, b)
    _expandable(self, (a.shape[0], b.shape[1]))


def _addmv_checks(self, mat, vec, self_size):
    if not (mat.dim() == 2 and vec.dim() == 1 and self.dim() <= 1):
        fail(f"vector + matrix @ vector expected, got {self.dim()}, {mat.dim()}, {vec.dim()}")
    if mat.shape[1] != vec.shape[0] or (mat.shape[0] != self.numel() and self.numel() != 1):
        fail(f"size mismatch, got input ({self_size}), mat ({mat.shape[0]}x{mat.shape[1]}), "
             f"vec ({vec.shape[0]})")


def _addmv_dtypes(self_dtype, mat, vec):
    if not self_dtype == mat.dtype == vec.dtype:
        fail(f"addmv input tensors must have the same dtype, but got {type_name(self_dtype)}, "
             f"{type_name(mat.dtype)}, and {type_name(vec.dtype)}")


@check(aten.addmv.default, aten.addmv.out, aten.addmv_.default)
def _addmv(self, mat, vec, beta=1, alpha=1):
    _addmv_checks(self, mat, vec, self.shape[0] if self.dim() else 1)
    _addmv_dtypes(mat.dtype if _scalar(self) else self.dtype, mat, vec)


@check(aten.mv.default, aten.mv.out)
def _mv(mat, vec):
    # eager: addmv into a result of vec's dtype and mat's row count
    if mat.dim() != 2 or vec.dim() != 1:
        fail(f"vector + matrix @ vector expected, got 1, {mat.dim()}, {vec.dim()}")
    _addmv_checks(torch.empty(mat.shape[0], device="meta"), mat, vec, mat.shape[0])
    _addmv_dtypes(vec.dtype, mat, vec)


@check(aten.dot.default, aten.vdot.default, aten.dot.out, aten.vdot.out)
def _dot(a, b):
    if a.dim() != 1 or b.dim() != 1:
        fail(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.dtype != b.dtype:
        fail(f"dot : expected both vectors to have same dtype, but found {type_name(a.dtype)} "
             f"and {type_name(b.dtype)}")
    if a.numel() != b.numel():
        fail(f"inconsistent tensor size, expected tensor [{a.numel()}] and src [{b.numel()}] to "
             f"have the same number of elements, but got {a.numel()} and {b.numel()} elements "
             "respectively")


def _batches(a, b):
    """bmm's shape checks (the meta kernel's words are eager's), then its dtype check."""
    if a.dim() != 3:
        fail("batch1 must be a 3D tensor")
    if b.dim() != 3:
        fail("batch2 must be a 3D tensor")
    if (b.shape[0], b.shape[1]) != (a.shape[0], a.shape[2]):
        fail(f"Expected size for first two dimensions of batch2 tensor to be: "
             f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")


@check(aten.bmm.default, aten.bmm.out)
def _bmm(a, b):
    _batches(a, b)
    if a.dtype != b.dtype:
        fail(f"expected scalar type {type_name(a.dtype)} but found {type_name(b.dtype)}")


@check(aten.baddbmm.default, aten.baddbmm.out, aten.baddbmm_.default)
def _baddbmm(self, a, b, beta=1, alpha=1):
    _batches(a, b)
    _expandable(self, (a.shape[0], a.shape[1], b.shape[2]))
    if _differ(self, a):
        fail(f"Input dtypes must be the same, got: input {cpp_type_name(self.dtype)}, "
             f"batch1: {cpp_type_name(a.dtype)}, batch2: {cpp_type_name(b.dtype)}")
    if a.dtype != b.dtype:
        fail(f"expected scalar type {type_name(a.dtype)} but found {type_name(b.dtype)}")


def _matrix_batches(a, b):
    """addbmm's shape checks (it sums the batch's products: other words than bmm's)."""
    if a.dim() != 3:
        fail("batch1 must be a 3D tensor")
    if b.dim() != 3:
        fail("batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0]:
        fail(f"batch1 and batch2 must have same number of batches, got {a.shape[0]} and "
             f"{b.shape[0]}")
    if a.shape[2] != b.shape[1]:
        fail(f"Incompatible matrix sizes for bmm ({a.shape[1]}x{a.shape[2]} and "
             f"{b.shape[1]}x{b.shape[2]})")


@check(aten.addbmm.default, aten.addbmm.out, aten.addbmm_.default)
def _addbmm(self, a, b, beta=1, alpha=1):
    # eager expands self to the result's shape first (sizes read as torch reads them: its
    # IndexError for a batch of too few dims)
    _expandable(self, (_size(a, 1), _size(b, 2)))
    _matrix_batches(a, b)
    if _differ(self, b):  # (eager runs addmm per batch: its dtype check, with self and mat2)
        fail(f"self and mat2 must have the same dtype, but got {type_name(self.dtype)} and "
             f"{type_name(b.dtype)}")
    if a.dtype != b.dtype:
        fail(f"mat1 and mat2 must have the same dtype, but got {type_name(a.dtype)} and "
             f"{type_name(b.dtype)}")

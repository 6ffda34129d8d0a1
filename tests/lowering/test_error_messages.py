"""The errors users meet most, word for word as eager raises them, in eager's order: a mis-sized
nn.Linear says "mat1 and mat2 shapes cannot be multiplied (20x16 and 32x8)" on lazyxla too
(PyTorch's meta kernel said "a and b must have same reduction dim, but got [20, 16] X [32, 8]."),
a mis-sized nn.Conv2d names the channels it expected (it said "Invalid channel dimensions"; a
transposed convolution failed inside JAX, or computed where eager raises)."""
import pytest
import torch
import torch.nn.functional as F

import lazyxla

D = lazyxla.device()
F64 = torch.float64


def r(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)  # (on the device the test makes the default)


PRODUCTS = {
    "linear": lambda: F.linear(r(2, 10, 16), r(8, 32)),
    "linear, 2-d input": lambda: F.linear(r(10, 16), r(8, 32)),
    "linear, 1-d input": lambda: F.linear(r(16), r(8, 32)),
    "linear, bias of another size": lambda: F.linear(r(10, 16), r(8, 16), r(7)),
    "linear, double weight": lambda: F.linear(r(2, 10, 16), r(8, 16, dtype=F64)),
    "linear, double bias": lambda: F.linear(r(10, 16), r(8, 16), r(8, dtype=F64)),
    "nn.Linear": lambda: torch.nn.Linear(32, 8)(r(4, 16)),
    "mm": lambda: torch.mm(r(10, 16), r(8, 16)),
    "mm, vector": lambda: torch.mm(r(16), r(16, 8)),
    "mm, vector second": lambda: torch.mm(r(4, 16), r(16)),
    "mm, dtypes": lambda: torch.mm(r(10, 16), r(16, 8, dtype=torch.int64)),
    "mm, shapes before dtypes": lambda: torch.mm(r(10, 16), r(8, 16, dtype=F64)),
    "addmm, self dtype first": lambda: torch.addmm(r(7, dtype=F64), r(10), r(8, 16)),
    "addmm, mat1 dtype": lambda: torch.addmm(r(8), r(10, 16, dtype=F64), r(16, 8)),
    "addmm, mat1 rank": lambda: torch.addmm(r(8), r(16), r(16, 8)),
    "addmm, self of too many dims": lambda: torch.addmm(r(2, 3, 8), r(3, 16), r(16, 8)),
    "mv": lambda: torch.mv(r(10, 16), r(8)),
    "mv, vector": lambda: torch.mv(r(10), r(10)),
    "mv, dtypes": lambda: torch.mv(r(10, 16), r(16, dtype=F64)),
    "addmv, self": lambda: torch.addmv(r(7), r(10, 16), r(16)),
    "addmv, dtypes": lambda: torch.addmv(r(10, dtype=F64), r(10, 16), r(16)),
    "dot": lambda: torch.dot(r(16), r(8)),
    "dot, dtypes before sizes": lambda: torch.dot(r(16), r(8, dtype=F64)),
    "vdot": lambda: torch.vdot(r(16), r(8)),
    "bmm, dtypes": lambda: torch.bmm(r(2, 3, 4), r(2, 4, 6, dtype=F64)),
    "bmm, shapes before dtypes": lambda: torch.bmm(r(2, 3, 4), r(2, 5, 6, dtype=F64)),
    "baddbmm, batch2 dtype": lambda: torch.baddbmm(r(2, 3, 6), r(2, 3, 4), r(2, 4, 6, dtype=F64)),
    "baddbmm, self dtype": lambda: torch.baddbmm(r(2, 3, 6, dtype=F64), r(2, 3, 4), r(2, 4, 6)),
    "baddbmm, batch1 dtype": lambda: torch.baddbmm(r(2, 3, 6), r(2, 3, 4, dtype=F64), r(2, 4, 6)),
    "addbmm, sizes": lambda: torch.addbmm(r(3, 6), r(2, 3, 4), r(2, 5, 6)),
    "addbmm, batches": lambda: torch.addbmm(r(3, 6), r(2, 3, 4), r(3, 4, 6)),
    "addbmm, self first": lambda: torch.addbmm(r(3, 6), r(3, 4), r(3, 4, 6)),
    "addbmm, dtypes": lambda: torch.addbmm(r(3, 6, dtype=F64), r(2, 3, 4), r(2, 4, 6)),
    "matmul, 1-d by 2-d": lambda: torch.matmul(r(4), r(5, 6)),
    "matmul, 2-d by 1-d": lambda: torch.matmul(r(6, 4), r(5)),
    "matmul, batched": lambda: torch.matmul(r(2, 3, 4), r(5, 6)),
}


CONVOLUTIONS = {
    "conv2d, channels": lambda: F.conv2d(r(1, 5, 8, 8), r(4, 3, 3, 3)),
    "conv2d, channels of groups": lambda: F.conv2d(r(1, 5, 8, 8), r(4, 3, 3, 3), groups=2),
    "conv1d, channels": lambda: F.conv1d(r(1, 5, 8), r(4, 3, 3)),
    "conv2d, unbatched": lambda: F.conv2d(r(5, 8, 8), r(4, 3, 3, 3)),
    "conv2d, channels before bias": lambda: F.conv2d(r(1, 5, 8, 8), r(4, 3, 3, 3), r(3)),
    "nn.Conv1d": lambda: torch.nn.Conv1d(4, 3, 3)(r(2, 5, 8)),
    "conv_transpose2d, channels": lambda: F.conv_transpose2d(r(1, 5, 8, 8), r(4, 3, 3, 3)),
    "conv_transpose1d, groups": lambda: F.conv_transpose1d(r(1, 4, 8), r(4, 2, 3), groups=3),
    "conv_transpose1d, bias": lambda: F.conv_transpose1d(r(1, 4, 8), r(4, 2, 3), r(3)),
    "conv_transpose1d, channels before output padding":
        lambda: F.conv_transpose1d(r(1, 5, 8), r(4, 2, 3), output_padding=2),
    "nn.ConvTranspose2d": lambda: torch.nn.ConvTranspose2d(4, 3, 3)(r(1, 5, 8, 8)),
}
BROADCASTS = {  # eager's "The size of tensor a (4) must match the size of tensor b (5) at
    # non-singleton dimension 1" (PyTorch's Python meta kernels: "Attempting to broadcast a dimension
    # of length 5 at -1! Mismatching argument at index 1 had torch.Size([3, 5]); ...")
    "add": lambda: r(3, 4) + r(3, 5),
    "mul, 3-d by 2-d": lambda: r(2, 3, 4) * r(2, 4),
    "where": lambda: torch.where(r(2, 3) > 0, r(2, 4), r(2, 3)),
    "addcmul": lambda: torch.addcmul(r(3), r(3), r(4)),
    "masked_fill (mask first)": lambda: r(2, 3).masked_fill(r(2, 4) > 0, 1.0),
    "masked_fill_": lambda: r(2, 3).masked_fill_(r(3, 3) > 0, 1.0),
    "rsub (other first)": lambda: torch.rsub(r(2), r(3)),
    "threshold_backward (self first)": lambda: torch.ops.aten.threshold_backward(r(3), r(4), 0.0),
    "kl_div": lambda: F.kl_div(r(3, 4), r(3, 5), reduction="batchmean"),
    "in place, growing self": lambda: r(3, 1).add_(r(3, 4)),
    "copy_": lambda: r(2, 3).copy_(r(3, 3)),
    "index_put_, values": lambda: r(4, 3).index_put_((torch.tensor([0, 1]),), r(3, 3)),
    "setitem, values": lambda: r(4, 3).__setitem__((slice(None), torch.tensor([0, 1])), r(4, 3)),
}
L = torch.long
SHAPES = {  # the meta kernels' own words before (lazyxla/lowering/shape_checks.py)
    "cat, sizes": lambda: torch.cat([r(2, 3), r(2, 4)]),
    "cat, skipping a legacy empty tensor": lambda: torch.cat([r(2, 3), r(0), r(2, 4)]),
    "cat, ranks": lambda: torch.cat([r(2, 3), r(2, 3, 1)]),
    "stack": lambda: torch.stack([r(2, 3), r(2, 3), r(2, 4)]),
    "layer_norm, input": lambda: F.layer_norm(r(2, 5), (3, 5)),
    "layer_norm, weight": lambda: F.layer_norm(r(2, 5), (5,), r(4)),
    "layer_norm, bias": lambda: F.layer_norm(r(2, 5), (5,), r(5), r(4)),
    "nn.LayerNorm": lambda: torch.nn.LayerNorm(8)(r(2, 5)),
    "embedding, float indices": lambda: F.embedding(r(3), r(10, 4)),
    "embedding, 1-d weight": lambda: F.embedding(r(3, dtype=L), r(10)),
    "gather, index size": lambda: r(4, 4).gather(1, r(5, 2, dtype=L)),
    "reflection pad too large": lambda: F.pad(r(1, 1, 4), (4, 4), mode="reflect"),
    "where, float condition": lambda: torch.where(r(2, 3), r(2, 3), r(2, 3)),
    "masked_fill, float mask": lambda: r(2, 3).masked_fill(r(2, 3), 1.0),
    "topk, k": lambda: r(2, 3).topk(4),
    "trace, 3-d": lambda: torch.trace(r(2, 2, 2)),
    "inv, not square": lambda: torch.linalg.inv(r(2, 3)),
    "det, 1-d": lambda: torch.linalg.det(r(3)),
    "roll": lambda: torch.roll(r(3, 3), (1, 2), (0,)),
    "flip, a dim twice": lambda: torch.flip(r(3, 3), (0, -2)),
    "grid_sample, grid": lambda: F.grid_sample(r(1, 1, 4, 4), r(1, 2, 2, 3)),
    "index_add, count": lambda: r(4, 3).index_add(0, r(2, dtype=L), r(3, 3)),
    "index_copy, count (IndexError)": lambda: r(4, 3).index_copy(0, r(2, dtype=L), r(3, 3)),
    "masked_scatter, dtypes": lambda: r(4).masked_scatter(r(4) > 0, r(4, dtype=L)),
    "mean of integers": lambda: r(2, 3, dtype=L).mean(),
    "randn, negative size": lambda: torch.randn(2, -3),
}
CASES = {**PRODUCTS, **CONVOLUTIONS, **BROADCASTS, **SHAPES}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_raises_eagers_error(case):
    with pytest.raises(Exception) as eager:
        CASES[case]()
    with torch.device(D), pytest.raises(type(eager.value)) as got:
        CASES[case]()
        lazyxla.sync()
    assert str(got.value).splitlines()[0] == str(eager.value).splitlines()[0]


def test_a_cpu_scalar_bias_of_another_dtype_is_still_accepted():
    a, b = torch.ones(2, 3, device=D), torch.ones(3, 4, device=D)
    torch.testing.assert_close(torch.addmm(torch.tensor(1.0, dtype=F64), a, b).cpu(), torch.full((2, 4), 4.0))

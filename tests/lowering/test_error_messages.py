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
    # out= and in-place forms: PyTorch's meta kernels word these otherwise
    "mm, out=": lambda: torch.mm(r(3, 4), r(3, 4), out=r(3, 4)),
    "matmul, out=": lambda: torch.matmul(r(3, 4), r(3, 4), out=r(3, 4)),
    "addmm, out=": lambda: torch.addmm(r(3, 4), r(3, 4), r(3, 4), out=r(3, 4)),
    "addmm_": lambda: r(3, 4).addmm_(r(3, 4), r(3, 4)),
    "addmv_": lambda: r(3).addmv_(r(3, 4), r(3)),
    "mv, out=": lambda: torch.mv(r(3, 4), r(3), out=r(3)),
    "bmm, out=": lambda: torch.bmm(r(2, 3, 4), r(2, 3, 4), out=r(2, 3, 4)),
    "baddbmm_": lambda: r(2, 3, 4).baddbmm_(r(2, 3, 4), r(2, 3, 4)),
    "addbmm_": lambda: r(3, 4).addbmm_(r(2, 3, 4), r(2, 3, 4)),
    "dot, out=": lambda: torch.dot(r(3), r(4), out=r()),
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
    # _foreach ops: eager names the first list position whose tensors do not broadcast
    "_foreach_add_, second position": lambda: torch._foreach_add_([r(2), r(3)], [r(2), r(4)]),
    "_foreach_add, second position": lambda: torch._foreach_add([r(2), r(3)], [r(2), r(4)]),
    "_foreach_mul_, grows self": lambda: torch._foreach_mul_([r(1), r(3)], [r(2), r(3)]),
    "_foreach_addcmul_": lambda: torch._foreach_addcmul_([r(2)], [r(2)], [r(5)]),
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
    "expand to fewer dims": lambda: r(2, 3).expand(3),
    "expand bool to fewer dims": lambda: r(2, 3, dtype=torch.bool).expand(3),
    "zeros, negative size": lambda: torch.zeros(2, -3),
    "repeat, negative": lambda: r(2, 3).repeat(2, -1),
    "tile, negative": lambda: r(3).tile(-1),
    "max_pool2d of a matrix": lambda: F.max_pool2d(r(3, 4), 2),
    "max_pool2d of a matrix, indices": lambda: F.max_pool2d(r(3, 4), 2, return_indices=True),
    "multi_margin_loss, target count": lambda: F.multi_margin_loss(r(5, 10), r(3, dtype=L)),
    "multi_margin_loss, target rank": lambda: F.multi_margin_loss(r(5, 10), r(5, 1, dtype=L)),
    "multi_margin_loss, 3-d input": lambda: F.multi_margin_loss(r(2, 5, 10), r(2, dtype=L)),
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


X2 = torch.randn(2, 3)
L2 = lambda *shape: torch.zeros(*shape, dtype=torch.long)  # noqa: E731
DIM_OPS = {  # each op at dims 2 and -3 of a 2-d tensor: eager's IndexError (or its own error)
    "sort": lambda x, d: x.sort(d),
    "argsort": lambda x, d: x.argsort(d),
    "sort stable": lambda x, d: torch.sort(x, dim=d, stable=True),
    "topk": lambda x, d: x.topk(1, d),
    "kthvalue": lambda x, d: x.kthvalue(1, d),
    "cumsum": lambda x, d: x.cumsum(d),
    "cumprod": lambda x, d: x.cumprod(d),
    "logcumsumexp": lambda x, d: x.logcumsumexp(d),
    "cummax": lambda x, d: x.cummax(d),
    "cummin": lambda x, d: x.cummin(d),
    "flip": lambda x, d: x.flip(d),
    "roll": lambda x, d: x.roll(1, d),
    "narrow": lambda x, d: x.narrow(d, 0, 1),
    "select": lambda x, d: x.select(d, 0),
    "index_select": lambda x, d: x.index_select(d, L2(1)),
    "gather": lambda x, d: x.gather(d, L2(2, 3)),
    "scatter": lambda x, d: x.scatter(d, L2(2, 3), x),
    "scatter_add": lambda x, d: x.scatter_add(d, L2(2, 3), x),
    "scatter_reduce": lambda x, d: x.scatter_reduce(d, L2(2, 3), x, "amax"),
    "softmax": lambda x, d: x.softmax(d),
    "log_softmax": lambda x, d: x.log_softmax(d),
    "sum": lambda x, d: x.sum(d),
    "mean": lambda x, d: x.mean(d),
    "amax": lambda x, d: x.amax(d),
    "argmax": lambda x, d: x.argmax(d),
    "argmin": lambda x, d: x.argmin(d),
    "max.dim": lambda x, d: x.max(d),
    "min.dim": lambda x, d: x.min(d),
    "median.dim": lambda x, d: x.median(d),
    "nanmedian": lambda x, d: x.nanmedian(d),
    "mode": lambda x, d: x.mode(d),
    "var": lambda x, d: x.var(d),
    "std": lambda x, d: x.std(d),
    "var_mean": lambda x, d: torch.var_mean(x, d),
    "norm": lambda x, d: x.norm(dim=d),
    "vector_norm": lambda x, d: torch.linalg.vector_norm(x, dim=d),
    "all": lambda x, d: x.all(d),
    "any": lambda x, d: x.any(d),
    "prod": lambda x, d: x.prod(d),
    "logsumexp": lambda x, d: x.logsumexp(d),
    "nansum": lambda x, d: x.nansum(d),
    "count_nonzero": lambda x, d: x.count_nonzero(d),
    "unbind": lambda x, d: x.unbind(d),
    "split": lambda x, d: x.split(1, d),
    "chunk": lambda x, d: x.chunk(2, d),
    "tensor_split": lambda x, d: x.tensor_split(2, d),
    "squeeze": lambda x, d: x.squeeze(d),
    "unsqueeze": lambda x, d: x.unsqueeze(d + 1 if d > 0 else d - 1),
    "transpose": lambda x, d: x.transpose(0, d),
    "movedim": lambda x, d: x.movedim(0, d),
    "diff": lambda x, d: x.diff(dim=d),
    "renorm": lambda x, d: x.renorm(2, d, 1.0),
    "repeat_interleave": lambda x, d: x.repeat_interleave(2, d),
    "unique_consecutive": lambda x, d: torch.unique_consecutive(x, dim=d),
    "unique": lambda x, d: torch.unique(x, dim=d),
    "index_add": lambda x, d: x.index_add(d, L2(1), x[:1]),
    "index_copy": lambda x, d: x.index_copy(d, L2(1), x[:1]),
    "index_fill": lambda x, d: x.index_fill(d, L2(1), 1.0),
    "glu": lambda x, d: torch.nn.functional.glu(torch.randn(2, 4), d),
    "cross": lambda x, d: torch.linalg.cross(torch.randn(2, 3), torch.randn(2, 3), dim=d),
    "diagonal": lambda x, d: x.diagonal(0, 0, d),
    "take_along_dim": lambda x, d: torch.take_along_dim(x, L2(2, 3), d),
    "flatten": lambda x, d: x.flatten(0, d),
    "unflatten": lambda x, d: x.unflatten(d, (1, 3)),
    "cat": lambda x, d: torch.cat([x, x], d),
    "stack": lambda x, d: torch.stack([x, x], d + 1 if d > 0 else d - 1),
    "normalize": lambda x, d: torch.nn.functional.normalize(x, dim=d),
    "cosine_similarity": lambda x, d: torch.nn.functional.cosine_similarity(x, x, d),
    "softmin": lambda x, d: torch.nn.functional.softmin(x, d),
    "gumbel": lambda x, d: torch.nn.functional.gumbel_softmax(x, dim=d) * 0,
    "cumulative_trapezoid": lambda x, d: torch.cumulative_trapezoid(x, dim=d),
    "trapezoid": lambda x, d: torch.trapezoid(x, dim=d),
    "fft": lambda x, d: torch.fft.fft(x, dim=d),
    "rfft": lambda x, d: torch.fft.rfft(x, dim=d),
    "amin": lambda x, d: x.amin(d),
    "aminmax": lambda x, d: torch.aminmax(x, dim=d),
    "std_mean": lambda x, d: torch.std_mean(x, d),
    "nanmean": lambda x, d: x.nanmean(d),
    "max_unary_dim_keep": lambda x, d: x.max(d, keepdim=True),
    "sum_list": lambda x, d: x.sum([0, d]),
    "dist": lambda x, d: x.unfold(d, 1, 1),
    "select_scatter": lambda x, d: torch.select_scatter(x, x[0], d, 0),
    "slice_scatter": lambda x, d: torch.slice_scatter(x, x, d),
    "index_reduce": lambda x, d: x.index_reduce(d, L2(1), x[:1], "prod"),
    "masked_softmax": lambda x, d: torch.ops.aten._masked_softmax(x, x > 0, d, 2),
}


@pytest.mark.parametrize("dim", [2, -3])
@pytest.mark.parametrize("op", DIM_OPS, ids=list(DIM_OPS))
def test_a_dim_out_of_range_raises_eagers_error(op, dim):
    """sort, select_scatter, slice_scatter and index_reduce took such dims (the meta kernels do
    not check them) and computed along a wrapped dim."""
    with pytest.raises(Exception) as eager:
        DIM_OPS[op](X2, dim)
    with torch.device(D), pytest.raises(type(eager.value)) as got:
        DIM_OPS[op](X2.to(D), dim)
        lazyxla.sync()
    assert str(got.value).splitlines()[0] == str(eager.value).splitlines()[0]

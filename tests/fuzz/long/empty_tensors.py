"""Ops on tensors with no elements against eager: reductions (with and without dims, keepdim),
scans, sorts, shape ops, indexing, linear algebra, norms, losses, convolutions and pools, on six
shapes ((0,), (0, 3), (3, 0), (2, 0, 3), (1, 0) and a 0-dim one). A sweep, not a random fuzz: SEED
numbers the case (`python empty_tensors.py 0 2000`; past the last case a seed compares nothing).
Compared: errors (type), shapes, dtypes and values."""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _driver import host, main, outcome, same_outcome  # noqa: E402

import lazyxla  # noqa: E402

D = lazyxla.device()
SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 3), (1, 0), ()]


R = {}
for name in ["sum", "prod", "mean", "nansum", "nanmean", "amax", "amin", "max", "min", "argmax", "argmin", "std", "var", "logsumexp", "all", "any", "norm", "count_nonzero", "median", "nanmedian", "mode", "aminmax", "std_mean", "var_mean", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "softmax", "log_softmax", "sort", "argsort", "msort", "flip", "unique_consecutive"]:
    f = getattr(torch, name)
    R[name + "()"] = lambda x, f=f: f(x) if f not in (torch.softmax, torch.log_softmax, torch.cumsum, torch.cumprod, torch.cummax, torch.cummin, torch.logcumsumexp, torch.flip) else f(x, 0) if f is not torch.flip else f(x, (0,))
    for dim in (0, -1):
        R[f"{name}(d{dim})"] = lambda x, f=f, dim=dim: f(x, dim) if f not in (torch.flip, torch.unique_consecutive, torch.msort) else f(x, (dim,)) if f is torch.flip else f(x)
        R[f"{name}(d{dim},keep)"] = lambda x, f=f, dim=dim: f(x, dim, keepdim=True)
R.update({
 "topk0": lambda x: torch.topk(x, 0), "topk0d": lambda x: torch.topk(x, 0, dim=0),
 "kthvalue1": lambda x: torch.kthvalue(x, 1, 0),
 "max_other": lambda x: torch.maximum(x, x), "where": lambda x: torch.where(x > 0, x, -x),
 "matmul_t": lambda x: x @ x.mT if x.dim() >= 2 else x @ x, "mm_inner0": lambda x: x.mT @ x if x.dim() == 2 else x.sum(),
 "cat_legacy": lambda x: torch.cat([x, torch.ones(2, 3, device=x.device)]),
 "cat_self": lambda x: torch.cat([x, x], -1 if x.dim() else 0),
 "stack": lambda x: torch.stack([x, x], 1 if x.dim() else 0),
 "reshape-1": lambda x: x.reshape(-1), "reshape0,-1": lambda x: x.reshape(0, -1),
 "view_2": lambda x: x.view(2, -1),
 "split1": lambda x: x.split(1, 0), "chunk2": lambda x: x.chunk(2, 0), "tensor_split": lambda x: x.tensor_split(3, 0),
 "unbind0": lambda x: x.unbind(0), "unbind-1": lambda x: x.unbind(-1),
 "repeat": lambda x: x.repeat(2, *([1] * x.dim())), "tile": lambda x: x.tile(2), "expand": lambda x: x.expand(2, *x.shape),
 "roll": lambda x: x.roll(1, 0) if x.dim() else x.roll(1), "roll_flat": lambda x: x.roll(2),
 "tril": lambda x: x.tril(), "triu1": lambda x: x.triu(1), "diagonal": lambda x: x.diagonal(), "diag": lambda x: torch.diag(x),
 "diag_embed": lambda x: torch.diag_embed(x),
 "pad": lambda x: torch.nn.functional.pad(x, (1, 1)), "pad_reflect": lambda x: torch.nn.functional.pad(x, (1, 1), mode="reflect"),
 "pad_replicate": lambda x: torch.nn.functional.pad(x.unsqueeze(0), (1, 1), mode="replicate"),
 "pad_circular": lambda x: torch.nn.functional.pad(x.unsqueeze(0), (1, 1), mode="circular"),
 "index_select": lambda x: x.index_select(0, torch.zeros(0, dtype=torch.long, device=x.device)),
 "index_select_oob": lambda x: x.index_select(0, torch.zeros(1, dtype=torch.long, device=x.device)),
 "gather": lambda x: x.gather(0, torch.zeros_like(x, dtype=torch.long)),
 "scatter_add": lambda x: torch.zeros(3, *x.shape[1:], device=x.device).scatter_add(0, torch.zeros_like(x, dtype=torch.long), x),
 "masked_fill": lambda x: x.masked_fill(x > 0, 1.0),
 "index_empty": lambda x: x[torch.zeros(0, dtype=torch.long, device=x.device)],
 "nonzero": lambda x: x.nonzero(), "bincount": lambda x: torch.bincount(x.flatten().long().abs()),
 "histc": lambda x: torch.histc(x, 4), "histc_r": lambda x: torch.histc(x, 4, 0, 1),
 "searchsorted": lambda x: torch.searchsorted(x.flatten().sort()[0], torch.tensor([0.5], device=x.device)),
 "bucketize": lambda x: torch.bucketize(x, torch.tensor([0.0, 1.0], device=x.device)),
 "cdist": lambda x: torch.cdist(x, x) if x.dim() >= 2 else torch.cdist(x.reshape(1, -1, 1), x.reshape(1, -1, 1)),
 "dist": lambda x: torch.dist(x, x), "dot": lambda x: torch.dot(x.flatten(), x.flatten()),
 "outer": lambda x: torch.outer(x.flatten(), x.flatten()), "kron": lambda x: torch.kron(x, x),
 "trace": lambda x: torch.trace(x), "det": lambda x: torch.linalg.det(x), "inv": lambda x: torch.linalg.inv(x),
 "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
 "normalize": lambda x: torch.nn.functional.normalize(x, dim=0),
 "embedding": lambda x: torch.nn.functional.embedding(torch.zeros(0, dtype=torch.long, device=x.device), torch.ones(3, 2, device=x.device)),
 "cross_entropy": lambda x: torch.nn.functional.cross_entropy(x, torch.zeros(x.shape[0], dtype=torch.long, device=x.device)) if x.dim() == 2 else x.sum(),
 "mse": lambda x: torch.nn.functional.mse_loss(x, x), "l1": lambda x: torch.nn.functional.l1_loss(x, x), "bce": lambda x: torch.nn.functional.binary_cross_entropy(x.sigmoid(), x.sigmoid()),
 "nll": lambda x: torch.nn.functional.nll_loss(x, torch.zeros(x.shape[0], dtype=torch.long, device=x.device)) if x.dim() == 2 else x.sum(),
 "sum_dtype": lambda x: x.sum(dtype=torch.int32), "prod_int": lambda x: x.long().prod(),
 "mean_int": lambda x: x.long().mean(), "amax_empty_dims": lambda x: x.amax(dim=()),
 "sum_empty_dims": lambda x: x.sum(dim=()), "mean_empty_dims": lambda x: x.mean(dim=[]),
 "std_c0": lambda x: x.std(correction=0), "var_c2": lambda x: x.var(correction=2),
 "clone_contig": lambda x: x.mT.contiguous() if x.dim() >= 2 else x.clone(),
 "fill": lambda x: x.clone().fill_(2), "zero_": lambda x: x.clone().zero_(), "copy_bcast": lambda x: torch.empty(2, *x.shape, device=x.device).copy_(x),
 "movedim": lambda x: x.movedim(0, -1) if x.dim() else x, "flatten1": lambda x: x.flatten(1) if x.dim() > 1 else x.flatten(),
 "unflatten": lambda x: x.unflatten(0, (0, -1)) if x.dim() and x.shape[0] == 0 else x,
 "narrow": lambda x: x.narrow(0, 0, 0), "select_oob": lambda x: x.select(0, 0),
 "as_strided": lambda x: x.as_strided((2, 0), (1, 1)),
 "new_zeros": lambda x: x.new_zeros(x.shape).sum(0) if x.dim() else x,
 "median_all_int": lambda x: x.long().median(), "quantile": lambda x: torch.quantile(x, 0.5), "nanquantile": lambda x: torch.nanquantile(x, 0.5, dim=0),
 "renorm": lambda x: x.renorm(2, 0, 1.0), "cumsum_int": lambda x: x.long().cumsum(0) if x.dim() else x,
 "einsum": lambda x: torch.einsum("ij,ij->i", x, x) if x.dim() == 2 else x,
 "bmm": lambda x: torch.bmm(x, x.mT) if x.dim() == 3 else x, "baddbmm": lambda x: torch.baddbmm(torch.zeros(2, 0, 0, device=x.device), x, x.mT) if x.dim() == 3 else x,
 "addmm": lambda x: torch.addmm(torch.ones(x.shape[1], x.shape[1], device=x.device), x.mT, x) if x.dim() == 2 else x,
 "conv1d": lambda x: torch.nn.functional.conv1d(x, torch.ones(2, 0, 1, device=x.device)) if x.dim() == 3 else x,
 "max_pool": lambda x: torch.nn.functional.max_pool1d(x, 1) if x.dim() == 3 else x,
 "avg_pool": lambda x: torch.nn.functional.avg_pool1d(x, 1) if x.dim() == 3 else x,
 "adaptive_avg": lambda x: torch.nn.functional.adaptive_avg_pool1d(x, 2) if x.dim() == 3 else x,
 "interp": lambda x: torch.nn.functional.interpolate(x, size=4) if x.dim() == 3 else x,
 "group_norm": lambda x: torch.nn.functional.group_norm(x, 1) if x.dim() == 3 else x,
 "batch_norm": lambda x: torch.nn.functional.batch_norm(x, None, None, training=True) if x.dim() == 3 else x,
 "softmax_empty_last": lambda x: torch.softmax(x, -1),
 "argmax_flat": lambda x: x.argmax(), "max_flat": lambda x: x.max(),
 "equal": lambda x: torch.equal(x, x), "allclose": lambda x: torch.allclose(x, x), "isin": lambda x: torch.isin(x, x),
 "item_numel": lambda x: x.numel(),
 "unique": lambda x: torch.unique(x), "tolist": lambda x: x.tolist(),
})
CASES = [(name, fn, shape) for name, fn in R.items() for shape in SHAPES]


def run(seed):
    if seed >= len(CASES):
        return None
    name, fn, shape = CASES[seed]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    want = outcome(lambda: host(fn(x.clone())))
    got = outcome(lambda: host(fn(x.clone().to(D))))
    if same_outcome(want, got):
        return None
    return f"{name} {shape}: eager {str(want)[:200]} lazyxla {str(got)[:200]}"


if __name__ == "__main__":
    raise SystemExit(main(run))

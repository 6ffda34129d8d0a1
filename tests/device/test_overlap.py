"""Writes whose result would depend on the order a kernel visits memory raise eager's error
(lazyxla/device/overlap.py); the overlapping writes eager accepts still compute eager's values."""
import pytest
import torch

import lazyxla

D = lazyxla.device()


def _a6(d):
    return torch.arange(6.0, device=d)


def _expanded(d):
    return torch.zeros(4, device=d).expand(3, 4)


CASES = {
    # a written tensor with a stride 0 over several elements
    "expanded_add_": lambda d: _expanded(d).add_(1),
    "expanded_relu_": lambda d: _expanded(d).relu_(),
    "expanded_uniform_": lambda d: _expanded(d).uniform_(),
    "expanded_copy_": lambda d: _expanded(d).copy_(torch.ones(3, 4, device=d)),
    "expanded_copy_from_cpu": lambda d: _expanded(d).copy_(torch.ones(3, 4)),
    "expanded_foreach_add_": lambda d: torch._foreach_add_([_expanded(d)], 1),
    # an input that partly overlaps the written tensor
    "shifted_add_": lambda d: (lambda a: a[1:].add_(a[:-1]))(_a6(d)),
    "whole_add_its_row": lambda d: (lambda a: a.add_(a[0]))(_a6(d).view(2, 3)),
    "add_own_transpose": lambda d: (lambda a: a.add_(a.t()))(_a6(d)[:4].view(2, 2)),
    "copy_own_transpose": lambda d: (lambda a: a.copy_(a.t()))(_a6(d)[:4].view(2, 2)),
    "shifted_copy_": lambda d: (lambda a: a[1:].copy_(a[:-1]))(_a6(d)),
    "shifted_setitem": lambda d: (lambda a: a.__setitem__(slice(1, None), a[:-1]))(_a6(d)),
    "out_shifted": lambda d: (lambda a: torch.mul(a[:4], 2, out=a[1:5]))(_a6(d)),
    "dtype_view_shifted_add_": lambda d: (lambda a: a.view(torch.int32)[1:].add_(a.view(torch.int32)[:-1]))(_a6(d)),
    # out= kernels that refuse any overlap with an input (at::assert_no_overlap), whole buffers too
    "index_select_into_its_input": lambda d: (lambda a: torch.index_select(
        a, 0, torch.tensor([5, 4, 3, 2, 1, 0], device=d), out=a))(_a6(d)),
    "gather_into_its_input": lambda d: (lambda a: torch.gather(
        a, 0, torch.tensor([1, 0, 2, 3, 4, 5], device=d), out=a))(_a6(d)),
    "take_into_its_input": lambda d: (lambda a: torch.take(a, torch.tensor([1, 0], device=d), out=a[:2]))(_a6(d)),
    "cat_into_its_inputs": lambda d: (lambda a: torch.cat([a[:3], a[3:]], out=a))(_a6(d)),
    "stack_into_its_inputs": lambda d: (lambda a: torch.stack([a[:2], a[2:4]], out=a[:4].view(2, 2)))(_a6(d)),
    "cross_into_its_input": lambda d: (lambda a: torch.linalg.cross(a[:3], a[3:], out=a[:3]))(_a6(d)),
    # out= kernels that are not pointwise but check partial overlap as TensorIterator does
    "cumsum_out_shifted": lambda d: (lambda a: torch.cumsum(a[:4], 0, out=a[1:5]))(_a6(d)),
    "addmm_out_shifted": lambda d: (lambda a: torch.addmm(a[:4].view(2, 2), a[:4].view(2, 2), a[:4].view(2, 2),
                                                          out=a[1:5].view(2, 2)))(_a6(d)),
    # ops that run on the CPU (masked_select's shape depends on the data): checked before
    "masked_select_out_into_its_input": lambda d: (lambda a: torch.masked_select(a, a > 2, out=a[:3]))(_a6(d)),
    # index_put_ checks its values against the written tensor (any overlap), not the tensor itself
    "setitem_from_a_view_of_itself": lambda d: (lambda a: a.__setitem__(
        torch.tensor([1, 0], device=d), a[1:3]))(_a6(d)),
    "index_put_from_itself": lambda d: (lambda a: a.index_put_((torch.arange(6, device=d),), a))(_a6(d)),
    # empty_strided's storage holds as many elements as its strides reach
    "copy_into_stride_0_empty_strided": lambda d: torch.empty_strided((2, 3), (0, 1), device=d).copy_(
        _a6(d).view(2, 3)),
}
ACCEPTED = {
    "expanded_fill_": lambda d: _expanded(d).fill_(1),
    "expanded_masked_fill_": lambda d: _expanded(d).masked_fill_(torch.ones(3, 4, device=d) > 0, 1),
    "row_add_whole_sum": lambda d: (lambda a: (a[0].add_(a.sum(0)), a)[1])(_a6(d).view(2, 3)),
    "row_add_other_row": lambda d: (lambda a: (a[0].add_(a[1]), a)[1])(_a6(d).view(2, 3)),
    "add_itself": lambda d: (lambda a: a.add_(a))(_a6(d)),
    "view_add_itself": lambda d: (lambda a: (a[1:].add_(a[1:]), a)[1])(_a6(d)),
    "copy_same_view": lambda d: (lambda a: (a[1:].copy_(a[1:]), a)[1])(_a6(d)),
    "out_same_view": lambda d: (lambda a: (torch.mul(a[:4], 2, out=a[:4]), a)[1])(_a6(d)),
    "reduction_out_beside_input": lambda d: (lambda a: (torch.sum(a[:4].view(2, 2), 0, out=a[4:]), a)[1])(_a6(d)),
    "column_mul_other_column": lambda d: (lambda a: (a[:, 0].mul_(a[:, 1]), a)[1])(_a6(d).view(3, 2)),
    "interleaved_add_": lambda d: (lambda a: (a[::2].add_(a[1::2]), a)[1])(_a6(d)),
    "diagonal_add_transposed_diagonal": lambda d: (lambda a: (a.diagonal().add_(a.t().diagonal()), a)[1])(
        _a6(d)[:4].view(2, 2)),
    "overlapping_unfold_add_": lambda d: (lambda a: (a[:4].unfold(0, 2, 2).add_(1), a)[1])(_a6(d)),
    "index_put_from_a_copy": lambda d: (lambda a: a.index_put_((torch.arange(6, device=d),), a.clone() * 2))(_a6(d)),
    "index_put_on_expanded": lambda d: torch.zeros(3, device=d).expand(2, 3).index_put_(
        (torch.tensor([0], device=d),), torch.ones(3, device=d)),
    "fill_stride_0_empty_strided": lambda d: torch.empty_strided((2, 3), (0, 1), device=d).fill_(2),
}


@pytest.mark.parametrize("fn", CASES.values(), ids=CASES.keys())
def test_overlapping_write_raises_eager_error(fn):
    with pytest.raises(RuntimeError, match="unsupported operation") as cpu:
        fn("cpu")
    with pytest.raises(RuntimeError) as dev:
        fn(D)
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("fn", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_overlap_eager_accepts_computes_eager_values(fn):
    torch.testing.assert_close(fn(D).cpu(), fn("cpu"))


def test_write_reading_its_target_through_a_view_eager_cannot_classify_reads_the_old_values():
    """`a.add_(a[:, :1])`: the column view is not dense, so eager's check lets it pass and its
    kernel's later elements see earlier writes (a[i, 1] gets the doubled a[i, 0]). lazyxla reads
    the inputs as they were before the call, as numpy does (README, limits)."""
    a = torch.arange(6.0).view(3, 2)
    got = a.to(D)
    got.add_(got[:, :1])
    eager = a.clone()
    eager.add_(eager[:, :1])
    torch.testing.assert_close(got.cpu(), a + a[:, :1])
    assert not torch.equal(got.cpu(), eager)  # eager's order-dependent result, for the record


def test_masked_scatter_from_a_source_overlapping_its_target_raises():
    """Eager's masked_scatter_ checks no overlap: it writes element by element, reading a source
    element it may already have written ([0, 1, 2, 1, 2, 1] here), which a program reading the old
    values (numpy's [0, 1, 2, 1, 2, 3]) would not give. lazyxla raises eager's overlap error
    rather than return another number (README, limits)."""
    a = _a6(D)
    with pytest.raises(RuntimeError, match="unsupported operation: some elements"):
        a.masked_scatter_(a > 2, a[1:])


def _opinfo_out_calls():
    from torch.testing._internal.common_methods_invocations import op_db
    names = {"addmm", "cumsum", "logcumsumexp", "nn.functional.gelu", "where", "scatter_add", "msort",
             "renorm", "mvlgamma", "gather", "index_select", "take", "take_along_dim", "cat", "stack",
             "linalg.cross", "masked_select", "mm", "bmm", "softmax", "std", "norm", "diag", "exp", "add"}
    return [info for info in op_db if info.name in names and info.supports_out
            and info.variant_test_name in ("", "reduction_sum")][:len(names)]


def _out_call(info, dev, shift):
    """info's first usable float32 sample called with out= a view of the buffer holding its
    inputs, starting `shift` elements in; None where no sample fits."""
    for s in info.sample_inputs("cpu", torch.float32):
        xs = list(s.input) if isinstance(s.input, (list, tuple)) else [s.input]
        if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.numel() for t in xs):
            continue
        want = info.op(s.input, *s.args, **s.kwargs)
        if not isinstance(want, torch.Tensor) or want.dtype != torch.float32 or not want.numel():
            continue
        n = sum(t.numel() for t in xs)
        big = torch.cat([t.flatten() for t in xs] + [torch.zeros(max(0, want.numel() + shift - n) + 1)]).to(dev)
        ins, k = [], 0
        for t in xs:
            ins.append(big[k:k + t.numel()].view(t.shape))
            k += t.numel()
        out = big[shift:shift + want.numel()].view(want.shape)
        move = lambda v: v.to(dev) if isinstance(v, torch.Tensor) else v  # noqa: E731
        args = [move(a) for a in s.args]
        kwargs = {key: move(v) for key, v in s.kwargs.items()}
        x = ins if isinstance(s.input, (list, tuple)) else ins[0]
        return lambda: info.op(x, *args, **kwargs, out=out)
    return None


def _raises_overlap(call):
    try:
        call()
        lazyxla.sync()
    except RuntimeError as e:
        if "refer to a single memory location" in str(e):
            return True
        raise
    return False


@pytest.mark.parametrize("shift", [0, 1], ids=["same_start", "shifted"])
def test_out_overloads_check_overlap_as_eagers_kernels_do(shift):
    """Eager's out= kernels check differently: TensorIterator's (pointwise, and some others) refuse
    partial overlap with an input, cat/gather/index_select and a few more any overlap, matrix
    products, softmax and reductions none. On the OpInfo samples, out= a view of the buffer
    holding the inputs: lazyxla raises exactly where eager does."""
    differ = []
    for info in _opinfo_out_calls():
        cpu, dev = _out_call(info, "cpu", shift), _out_call(info, D, shift)
        if cpu is not None and _raises_overlap(cpu) != _raises_overlap(dev):
            differ.append(info.name)
    assert differ == []

"""Views alias their base: a write through any view is seen by the base and every other view."""
import copy
import math
import re

import pytest
import torch

import lazyxla


def both(fn):
    """Run fn on a CPU tensor and on a lazyxla copy; compare every tensor fn returns."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    cpu = fn(base.clone())
    dev = fn(base.to(lazyxla.device()))
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.cpu(), c)


def test_write_through_select_is_seen_by_base():
    def f(x):
        x[1].fill_(-1)
        return (x,)
    both(f)


def test_write_through_transpose_and_slice():
    def f(x):
        t = x.t()
        t[2:4, 1].mul_(10)
        return x, t
    both(f)


def test_base_write_is_seen_by_existing_views():
    def f(x):
        v = x[:, 1:3]
        w = x.view(2, 12)
        x.add_(100)
        return v, w
    both(f)


def test_view_of_view_write_reaches_every_alias():
    def f(x):
        a = x.view(4, 6)[1:3]
        b = a.transpose(0, 1)
        c = x.select(1, 2)
        b[2].zero_()
        return x, a, b, c
    both(f)


def test_view_metadata_like_torch_xla():
    x = torch.zeros(2, 3, device=lazyxla.device())
    t = x.t()
    assert t._is_view() and t._base is x
    assert t.shape == (3, 2)


def test_copy_into_slice_and_expand_read():
    def f(x):
        x[0:2, 0:2] = torch.tensor([[7.0, 8.0], [9.0, 10.0]]).to(x.device)
        e = x[0:1].expand(3, 6)
        return x, e
    both(f)


def test_detach_shares_storage():
    x = torch.zeros(3, device=lazyxla.device())
    y = x.detach()
    y.add_(5)
    torch.testing.assert_close(x.cpu(), torch.full((3,), 5.0))


def test_in_place_view_ops_reshape_the_tensor_and_keep_aliasing():
    def f(x):
        row = x[0]
        x.t_()
        x.mul_(2)
        y = x.clone()
        y.unsqueeze_(0)
        y.squeeze_(0)
        y.transpose_(0, 1)
        return x, row, y
    both(f)


def test_view_as_another_dtype_reinterprets_bytes_and_writes_through():
    def f(x):
        ints = x.view(torch.int32)
        ints[0, 0] = 7  # a write through the view changes x's bytes
        return x.clone(), ints.clone(), x.view(torch.uint8).clone(), x.view(torch.bfloat16).clone(), \
            x.view(torch.uint8).view(torch.float32).clone()
    xc = torch.tensor([[1.0, -2.0], [3.5, 0.25]])
    want = f(xc.clone())
    got = f(xc.to(lazyxla.device()))
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, rtol=0, atol=0)


def test_write_through_part_of_an_expanded_view_reaches_the_shared_element():
    def f(x):
        col = torch.zeros(4, 1, device=x.device) + x[:, :1]
        col.expand(4, 3)[:, 1].add_(1)  # copies of one element share it: the write lands
        row = x[0].clone()
        row.expand(2, 6)[1].mul_(10)
        return col, row
    both(f)


def test_write_through_view_as_real_sets_the_imaginary_parts():
    def f(x):
        z = torch.complex(x[0, :3], x[1, :3])
        torch.view_as_real(z)[:, 1].fill_(-1)
        torch.view_as_real(z)[0, 0] = 9
        return (torch.view_as_real(z).clone(),)
    both(f)


def test_set_makes_two_tensors_share_one_storage():
    def f(x):
        a, b = x[0].clone(), x[1, :2].clone()
        a.set_(b)
        b[0] = -3
        a[1] = -7
        return a, b
    both(f)


_VIEWS = {
    "t": lambda x: x.t(),
    "transpose": lambda x: x.view(2, 2, 6).transpose(0, 2),
    "permute": lambda x: x.view(2, 2, 6).permute(2, 0, 1),
    "slice_step": lambda x: x[1:, ::2],
    "select_column": lambda x: x[:, 3],
    "diagonal": lambda x: x.diagonal(1),
    "expand": lambda x: x[1:2].expand(3, 6),
    "unfold": lambda x: x[1].unfold(0, 2, 2),
    "narrow": lambda x: x.narrow(1, 2, 3),
    "view_as_real": lambda x: torch.view_as_real(x.to(torch.complex64))[1:],
    "view_of_slice": lambda x: x[2:].view(12),
}


@pytest.mark.parametrize("make", _VIEWS.values(), ids=_VIEWS.keys())
def test_views_report_eager_strides_and_storage_offset(make):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    cpu, dev = make(base), make(base.to(lazyxla.device()))
    assert dev.shape == cpu.shape
    assert (dev.stride(), dev.storage_offset(), dev.is_contiguous()) == \
        (cpu.stride(), cpu.storage_offset(), cpu.is_contiguous())
    torch.testing.assert_close(dev.cpu(), cpu)


_MOVING = {  # views whose start moves from call to call (meta.view_at_start): at i = 0, 1, 2, 3
    "rows": lambda x, i: x[i:i + 1],
    "row_step": lambda x, i: x[i::2],
    "column": lambda x, i: x[:, i],
    "negative": lambda x, i: x[-1 - i],
    "narrow_columns": lambda x, i: x.narrow(1, i, 3),
    "of_a_transpose": lambda x, i: x.t()[i + 1],
    "of_a_slice": lambda x, i: x[1:][:, i:i + 2],
    "clamped": lambda x, i: x[i + 2:i + 9],
    "kwargs": lambda x, i: torch.ops.aten.slice.Tensor(x, dim=1, start=i, end=i + 2),
}


@pytest.mark.parametrize("make", _MOVING.values(), ids=_MOVING.keys())
def test_views_at_a_moving_start_report_eager_strides_and_storage_offset(make):
    """The second start on reuses the first's inference with the offset moved: each is eager's."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    lazy = base.to(lazyxla.device())
    for i in (0, 1, 2, 3, 1):
        cpu, dev = make(base, i), make(lazy, i)
        assert dev.shape == cpu.shape
        assert (dev.stride(), dev.storage_offset(), dev.is_contiguous()) == \
            (cpu.stride(), cpu.storage_offset(), cpu.is_contiguous()), i
        torch.testing.assert_close(dev.cpu(), cpu)


@pytest.mark.parametrize("index", [lambda x: x[4], lambda x: x[:, -7],
                                   lambda x: x.narrow(0, 3, 2)], ids=["row", "column", "narrow"])
def test_a_view_out_of_range_at_a_moving_start_raises_eagers_error(index):
    base = torch.arange(24.0).reshape(4, 6)
    lazy = base.to(lazyxla.device())
    for i in (0, 1, 2):
        lazy[i], lazy[:, -i], lazy.narrow(0, i, 2)
    with pytest.raises((IndexError, RuntimeError)) as want:
        index(base)
    with pytest.raises(want.type, match=f"^{re.escape(str(want.value))}$"):
        index(lazy)


@pytest.mark.parametrize("op", [
    lambda v: v.contiguous(), lambda v: v.reshape(-1), lambda v: v.flatten(), lambda v: v.reshape(3, 8),
], ids=["contiguous", "reshape", "flatten", "reshape_2d"])
def test_contiguous_and_reshape_of_a_transposed_view_copy_as_eager(op):
    """A write into the copy must not reach the base (`k.transpose(1, 2).contiguous().mul_(s)`)."""
    def f(x):
        y = op(x.t())
        y.mul_(-1)
        return x, y
    both(f)


@pytest.mark.parametrize("op", [lambda v: v.contiguous(), lambda v: v.reshape(-1), lambda v: v.flatten()],
                         ids=["contiguous", "reshape", "flatten"])
def test_contiguous_and_reshape_of_a_contiguous_view_alias_as_eager(op):
    def f(x):
        y = op(x[1:3])
        y.mul_(-1)
        return x, y
    both(f)


@pytest.mark.parametrize("fn", [
    lambda x: x.t().clone().t().view(-1),
    lambda x: torch.relu(x.view(2, 3, 4).transpose(1, 2)).transpose(1, 2).reshape(2, -1).view(-1),
    lambda x: x.view(1, 2, 3, 4).contiguous(memory_format=torch.channels_last).permute(0, 2, 3, 1).view(-1),
], ids=["clone_of_transposed", "elementwise_of_transposed", "channels_last_permute"])
def test_view_of_a_result_eager_keeps_strided_for_is_allowed(fn):
    """Eager's clone and elementwise ops keep a transposed input's strides, lazyxla's results are
    contiguous: a view eager allows on them must not raise here."""
    base = torch.arange(24.0).reshape(4, 6)
    torch.testing.assert_close(fn(base.to(lazyxla.device())).cpu(), fn(base))


@pytest.mark.parametrize("args", [((2, 2), (3, 1)), ((2, 2), (3, 1), 1), ((3,), (2,), 0)],
                         ids=["view_offset", "explicit_offset", "storage_start"])
def test_as_strided_of_a_view_addresses_the_storage(args):
    def f(x):
        y = x[1:].t().as_strided(*args)
        y.add_(100)
        return x, y
    both(f)


def test_gradient_through_as_strided_of_a_view():
    grads = []
    for dev in ("cpu", lazyxla.device()):
        a = torch.arange(12.0, requires_grad=True)
        w = torch.arange(4.0).reshape(2, 2).to(dev)
        ((a.to(dev) * 1)[2:].as_strided((2, 2), (3, 1)) * w).sum().backward()
        grads.append(a.grad)
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("write", [
    lambda x: x.permute(1, 0)[0].fill_(-1),
    lambda x: x.view(2, 2, 6).movedim(0, -1).mul_(2),
    lambda x: x.view(2, 2, 6).permute(2, 0, 1).reshape(6, 4).mul_(-1),
    lambda x: x[0].unfold(0, 2, 1)[0].fill_(9),
    lambda x: x.view(-1).as_strided((3, 2), (1, 1))[1].fill_(7),
    lambda x: x[1:3].t().as_strided_((2, 2), (6, 1), 1).fill_(-3),
], ids=["permute", "movedim", "permute_reshape", "unfold_overlapping", "as_strided_overlapping",
        "as_strided__of_view"])
def test_writes_through_permuted_overlapping_and_restrided_views_reach_the_base(write):
    def f(x):
        write(x)
        return (x,)
    both(f)


def test_view_between_complex_and_float_dtypes_reinterprets_and_writes_through():
    def f(x):
        z = x.view(torch.complex64)             # (4, 3) complex: (real, imag) pairs
        z[1].mul_(1j)
        back = z[2:].view(torch.float32)
        back.add_(0.5)
        return x, z, back, z.view(torch.int64)
    both(f)


def test_views_in_inference_mode_follow_eager():
    """A view of a normal tensor made in inference mode is a normal tensor (eager's rule): a module's
    weight.t() in F.linear failed with 'Cannot set version_counter for inference tensor'."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.randn(5, 3)
    results = {}
    for dev in ("cpu", lazyxla.device()):
        m = copy.deepcopy(model).to(dev)
        with torch.inference_mode():
            y = m(x.to(dev))
            v, made = m[0].weight.t(), torch.ones(3, device=dev)
            flags = (y.is_inference(), v.is_inference(), made[1:].is_inference())
        with pytest.raises(RuntimeError, match="created in inference mode"):
            v.add_(1)
        results[str(dev)] = (y.cpu(), flags)
    (y_cpu, f_cpu), (y_dev, f_dev) = results.values()
    assert f_dev == f_cpu == (True, False, True)
    torch.testing.assert_close(y_dev, y_cpu)
    compiled = torch.compile(copy.deepcopy(model).to(lazyxla.device()), backend="lazyxla")
    with torch.inference_mode():
        torch.testing.assert_close(compiled(x.to(lazyxla.device())).cpu(), y_cpu)


def test_transpose_of_a_0d_tensor_is_itself():
    """Dims 0 and -1 name a 0-d tensor's only 'dim' (it raised IndexError at sync)."""
    from lazyxla.testing import check
    check(lambda x: (torch.transpose(x, 0, 0) * 1, torch.transpose(x, -1, 0) * 1,
                     torch.transpose_copy(x, 0, -1)), torch.tensor(3.0))
    y = torch.tensor(2.0, device=lazyxla.device())
    y.transpose(0, 0).mul_(2)  # written back through the view
    assert y.item() == 4.0


def _resize_stepped_view(x):
    y = x[:, ::2]
    y.resize_(2)  # the storage's elements from y's offset on, contiguous
    return y, x


def _resize_slice_then_write(x):
    y = x[1]
    y.resize_(2, 2)
    y.fill_(-1)  # still x's storage: x sees it
    return y, x


def _resize_base_then_write_through_a_view(x):
    w = x[0, :2]
    x.resize_(3)
    w.fill_(7)
    return x, w


def _resize_transposed(x):
    y = x.t()
    y.resize_(4, 6)  # contiguous strides over the same storage
    y.add_(10)
    return y, x


def _resize_to_its_own_shape_keeps_strides(x):
    y = x.t()
    y.resize_(6, 4)
    return y, x


def _resize_channels_last(x):
    y = x.view(1, 2, 3, 4)
    y.resize_(1, 4, 3, 2, memory_format=torch.channels_last)
    return y, x


def _resize_shrink_then_grow_within(x):
    x.resize_(0)
    x.resize_(3, 8)  # within the storage's 24 elements: its old values
    return (x,)


@pytest.mark.parametrize("fn", [_resize_stepped_view, _resize_slice_then_write,
                                _resize_base_then_write_through_a_view, _resize_transposed,
                                _resize_to_its_own_shape_keeps_strides, _resize_channels_last,
                                _resize_shrink_then_grow_within])
def test_resize_keeps_the_storage_and_its_aliases_as_in_eager(fn):
    _same_tensors_as_eager(fn)


def _same_tensors_as_eager(fn):
    """fn's tensors on the device as on the CPU: values, shapes, strides and offsets."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    cpu, dev = fn(base.clone()), fn(base.to(lazyxla.device()))
    for c, d in zip(cpu, dev):
        assert (d.shape, d.stride(), d.storage_offset()) == (c.shape, c.stride(), c.storage_offset())
        torch.testing.assert_close(d.cpu(), c)


def test_resize_past_the_storage_keeps_its_elements_then_zeros():
    """Eager's new elements are uninitialized memory; lazyxla's are zeros."""
    x = torch.arange(6.0, device=lazyxla.device())
    y = x[2:]
    y.resize_(2, 3)
    assert (y.shape, y.stride(), y.storage_offset()) == ((2, 3), (3, 1), 2)
    assert y.cpu().tolist() == [[2, 3, 4], [5, 0, 0]]
    assert x.cpu().tolist() == [0, 1, 2, 3, 4, 5]


def test_resize_raises_eagers_errors():
    d = lazyxla.device()
    for t, args, kwargs in ((torch.ones(2, 3, requires_grad=True), (6,), {}),
                            (torch.ones(2), (-1,), {}),
                            (torch.ones(2), (2,), {"memory_format": torch.preserve_format})):
        with pytest.raises(RuntimeError) as want:
            t.clone().resize_(*args, **kwargs) if not t.requires_grad else t.resize_(*args)
        with pytest.raises(RuntimeError) as got:
            td = t.detach().to(d).requires_grad_(t.requires_grad)
            td.resize_(*args, **kwargs)
        assert str(got.value) == str(want.value)


def _out_resized_within_its_storage(x):
    v = x[0, 1:4]
    with pytest.warns(UserWarning, match="resized"):
        torch.add(x[1, :2], 1, out=v)  # eager resizes v in place: still x's storage
    return v, x


def _out_from_an_empty_slice(x):
    v = x[0, 3:3]
    torch.ops.aten.arange.start_out(-2, 0, 1, out=v)  # ATen's fftfreq writes its result so
    return v, x


@pytest.mark.parametrize("fn", [_out_resized_within_its_storage, _out_from_an_empty_slice])
def test_an_out_tensor_resized_within_its_storage_still_aliases_it(fn):
    _same_tensors_as_eager(fn)


def _in_both(fn):
    """fn(device) on the CPU and on lazyxla: its result, or the error's text."""
    out = []
    for d in ("cpu", lazyxla.device()):
        try:
            out.append(fn(d))
        except RuntimeError as e:
            out.append(str(e))
    return out


def test_empty_like_keeps_the_layout_of_its_input_after_a_call_on_another_layout():
    # the inference cache keyed empty_like by shape and dtype: after a contiguous input's call,
    # a transposed input's result reported contiguous strides (as_strided then read other elements)
    def run(d):
        a = torch.arange(9.0).reshape(3, 3).to(d)
        torch.empty_like(a)
        out = torch.empty_like(a.t()).copy_(a.t())
        cl = torch.zeros(1, 2, 2, 2, device=d).to(memory_format=torch.channels_last)
        torch.empty_like(torch.zeros(1, 2, 2, 2, device=d))
        return out.stride(), out.as_strided((9,), (1,)).cpu().tolist(), torch.empty_like(cl).stride()
    cpu, dev = _in_both(run)
    assert dev == cpu


def test_a_view_that_strides_forbid_raises_after_the_same_view_of_a_contiguous_tensor():
    # the cache hit skipped the meta kernel's stride check: a.t().view(9) made a view, and writes
    # through it landed in `a`
    def run(d):
        a = torch.arange(9.0).reshape(3, 3).to(d)
        a.view(9)
        return a.t().view(9).cpu().tolist()
    cpu, dev = _in_both(run)
    assert "view size is not compatible" in cpu and dev == cpu


@pytest.mark.parametrize("size,stride,offset", [((4, 4), (3, 1), None), ((2,), (1,), 9),
                                                ((3, 3), (2, 1), 5), ((2, 2), (2, 1), 5),
                                                ((0, 5), (1, 100), 50), ((5,), (2,), 0)])
def test_as_strided_past_the_storage_raises_eagers_error(size, stride, offset):
    # XLA clamped the reads: the last row of arange(10).as_strided((4, 4), (3, 1)) was [9, 9, 9, 9]
    def run(d):
        x = torch.arange(10.0, device=d)
        return (x.as_strided(size, stride) if offset is None else
                x.as_strided(size, stride, offset)).cpu().tolist()
    cpu, dev = _in_both(run)
    assert dev == cpu
    compiled = torch.compile(lambda t: t.as_strided((4, 4), (3, 1)), backend="lazyxla")
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 40"):
        compiled(torch.arange(10.0, device=lazyxla.device()))


@pytest.mark.parametrize("size,stride", [((2, 3), (10, 2)), ((2, 3), (1, 4)), ((3,), (5,)),
                                         ((2, 2, 2), (8, 1, 3)), ((1, 1), (5, 7))])
def test_empty_strided_with_gaps_keeps_its_strides_and_storage_as_eager(size, stride):
    # the factory gave contiguous strides and a storage of numel elements: as_strided then read
    # other elements than eager's
    def run(d):
        src = torch.arange(float(math.prod(size))).view(size)
        t = torch.empty_strided(size, stride, device=d).copy_(src.to(d))
        n = t.untyped_storage().nbytes() // 4
        return (t.stride(), n, t.cpu().tolist(),
                t.as_strided((min(n, 3),), (1,), t.storage_offset()).cpu().tolist()[:1])
    cpu, dev = _in_both(run)
    assert dev == cpu


def test_empty_strided_with_a_negative_stride_raises_eagers_error():
    cpu, dev = _in_both(lambda d: torch.empty_strided((2, 3), (-1, 2), device=d).shape)
    assert "Storage size calculation overflowed" in cpu and dev == cpu


def test_views_of_inference_tensors_made_outside_inference_mode_are_inference_tensors():
    # they were normal tensors: an in-place update wrote into the inference tensor, and autograd
    # saved one for backward, both of which eager refuses
    def run(d):
        with torch.inference_mode():
            t = torch.ones(2, 3, device=d)
            inside = t[0]
        views = (t[0], t.view(6), t.t(), t.expand(2, 2, 3), inside.view(3), t.unbind()[1])
        out = [v.is_inference() for v in views]
        for fn in (lambda: t[0].add_(1), lambda: (torch.ones(3, device=d, requires_grad=True) * t[0]).sum().backward()):
            try:
                fn()
                out.append("ran")
            except RuntimeError as e:
                out.append(str(e).split(".")[0])
        return out
    cpu, dev = _in_both(run)
    assert dev == cpu and cpu[:6] == [True] * 6

"""Bad arguments that PyTorch's meta kernels let through raise eager's error at the call
(lazyxla/lowering/checks.py), instead of computing something or failing at sync."""
import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla.testing import check

D = lazyxla.device()
X = torch.tensor([[0.5, -1.25, 2.0], [-0.75, 1.5, -3.0]])  # fixed: tests below need both signs
I = torch.arange(3)
IMG, W = torch.randn(1, 3, 5, 5), torch.randn(4, 3, 3, 3)

BAD = {
    "softmax_dim_out_of_range": lambda d: X.to(d).softmax(2),
    "log_softmax_dim_out_of_range": lambda d: X.to(d).log_softmax(-3),
    "mm_float_double": lambda d: X.to(d) @ torch.randn(3, 2, dtype=torch.float64).to(d),
    "mm_long_float": lambda d: X.long().to(d) @ torch.randn(3, 2).to(d),
    "linear_double_weight": lambda d: F.linear(X.to(d), torch.randn(2, 3, dtype=torch.float64).to(d)),
    "dot_float_double": lambda d: torch.dot(X[0].to(d), X[1].double().to(d)),
    "conv_negative_padding": lambda d: F.conv2d(IMG.to(d), W.to(d), padding=-1),
    "conv_zero_stride": lambda d: F.conv2d(IMG.to(d), W.to(d), stride=0),
    "conv_zero_dilation": lambda d: F.conv2d(IMG.to(d), W.to(d), dilation=0),
    "conv_groups_not_dividing": lambda d: F.conv1d(IMG[0, :, 0][None].to(d), torch.randn(4, 1, 3).to(d), groups=3),
    "conv_bias_size": lambda d: F.conv2d(IMG.to(d), W.to(d), torch.randn(2).to(d)),
    "conv_weight_dtype": lambda d: F.conv2d(IMG.to(d), W.double().to(d)),
    "conv_transpose_output_padding": lambda d: F.conv_transpose1d(
        torch.randn(1, 4, 5).to(d), torch.randn(4, 2, 3).to(d), output_padding=2),
    "cat_out_uncastable": lambda d: torch.cat([X.to(d), X.to(d)], out=torch.empty(0, dtype=torch.long, device=d)),
    "cat_out_complex_to_float": lambda d: torch.cat([X.to(torch.complex64).to(d)], out=torch.empty(0, device=d)),
    "isnan_out_float": lambda d: torch.ops.aten.isnan.out(X.to(d), out=torch.empty(0, device=d)),
    "index_select_2d_index": lambda d: X.to(d).index_select(0, torch.tensor([[0]]).to(d)),
    "index_select_float_index": lambda d: X.to(d).index_select(0, torch.tensor([0.0]).to(d)),
    "searchsorted_side": lambda d: torch.searchsorted(torch.arange(3.0).to(d), X.to(d), side="middle"),
    "index_select_dim_out_of_range": lambda d: X[0].to(d).index_select(1, torch.tensor([0]).to(d)),
    "index_put_dtype": lambda d: I.clone().to(d).index_put_((torch.tensor([0]).to(d),), torch.tensor([1.5]).to(d)),
    "index_with_float_tensor": lambda d: X.to(d)[torch.tensor([0.0]).to(d)],
    "index_put_mask_of_another_shape": lambda d: X.clone().to(d).__setitem__(X[:, :1].to(d) > 0, 0.5),
    "index_put_mask_of_another_length_after_a_slice": lambda d: X.clone().to(d).__setitem__(
        (slice(None), torch.tensor([True, False]).to(d)), 0.5),
    "index_tensors_not_broadcastable": lambda d: X.to(d)[torch.tensor([0, 1]).to(d), torch.tensor([0, 1, 2]).to(d)],
    "index_put_tensors_not_broadcastable": lambda d: X.clone().to(d).index_put_(
        (torch.tensor([0, 1]).to(d), torch.tensor([0, 1, 2]).to(d)), torch.tensor(1.0).to(d)),
    "cat_zero_dim": lambda d: torch.cat([torch.tensor(1.0).to(d)]),
    # dims the meta kernels took unchecked (sort sorted along a wrapped dim)
    "sort_dim_out_of_range": lambda d: X.to(d).sort(2),
    "sort_stable_dim_out_of_range": lambda d: torch.sort(X.to(d), dim=-3, stable=True),
    "argsort_dim_out_of_range": lambda d: X.to(d).argsort(2),
    "select_scatter_dim_out_of_range": lambda d: torch.select_scatter(X.to(d), X[0].to(d), 2, 0),
    "slice_scatter_dim_out_of_range": lambda d: torch.slice_scatter(X.to(d), X.to(d), -3),
    "index_reduce_dim_out_of_range": lambda d: X.to(d).index_reduce(2, I[:1].to(d), X[:1].to(d), "prod"),
    "index_fill_dim_out_of_range": lambda d: X.to(d).index_fill(2, I[:1].to(d), 1.0),
    "t_of_3d": lambda d: X[None].to(d).t(),
    "t__of_3d": lambda d: X[None].to(d).t_(),
    "clamp_without_bounds": lambda d: torch.clamp(X.to(d)),
    "clamp__without_bounds": lambda d: X.clone().to(d).clamp_(),  # raised a ValueError
    "std_of_int": lambda d: I.to(d).std(),
    "var_mean_of_int": lambda d: torch.var_mean(I.to(d)),
    "softmax_of_int": lambda d: I.to(d).softmax(0),
    "lerp_of_int": lambda d: torch.lerp(I.to(d), I.to(d), 0.5),
    "rand_int_dtype": lambda d: torch.rand(2, dtype=torch.int64, device=d),
    "randn_int_dtype": lambda d: torch.randn(2, dtype=torch.int64, device=d),
    "uniform__of_int": lambda d: I.clone().to(d).uniform_(),
    # Python scalar arguments eager's CPU kernels reject (checked again for each new value)
    "uniform__empty_range": lambda d: X.clone().to(d).uniform_(2, 1),
    "uniform__bound_out_of_float": lambda d: X.clone().to(d).uniform_(0, float("inf")),
    "bernoulli__p_above_one": lambda d: X.clone().to(d).bernoulli_(1.5),
    "bernoulli_p_negative": lambda d: torch.bernoulli(X.to(d), -0.1),
    "random__from_not_below_to": lambda d: X.clone().to(d).random_(5, 5),
    "random__negative_to": lambda d: X.clone().to(d).random_(-3),
    "random__to_beyond_int8": lambda d: I.to(torch.int8).to(d).random_(0, 300),
    "exponential__negative_lambda": lambda d: X.clone().to(d).exponential_(-1),
    "geometric__p_zero": lambda d: X.clone().to(d).geometric_(0),
    "cauchy__negative_sigma": lambda d: X.clone().to(d).cauchy_(0, -1),
    "log_normal__zero_std": lambda d: X.clone().to(d).log_normal_(1, 0),
    "normal__negative_std": lambda d: X.clone().to(d).normal_(0, -1),
    "full_int8_overflow": lambda d: torch.full((2,), 300, dtype=torch.int8, device=d),
    "full_half_overflow": lambda d: torch.full((2,), 1e6, dtype=torch.float16, device=d),
    "new_full_int8_overflow": lambda d: I.to(d).new_full((2,), 300, dtype=torch.int8),
    "full_like_int8_overflow": lambda d: torch.full_like(I.to(torch.int8).to(d), 300),
    "fill__int8_overflow": lambda d: I.to(torch.int8).to(d).fill_(300),
    "masked_fill_int8_overflow": lambda d: I.to(torch.int8).to(d).masked_fill(I.to(d) > 0, 300),
    "index_fill__int8_overflow": lambda d: I.to(torch.int8).to(d).index_fill_(0, I[:1].to(d), 300),
    "clamp_int8_bound_overflow": lambda d: I.to(torch.int8).to(d).clamp(max=300),
    "where_int8_scalar_overflow": lambda d: torch.where(I.to(d) > 0, I.to(torch.int8).to(d), 300),
    "threshold_int8_value_overflow": lambda d: F.threshold(I.to(torch.int8).to(d), 0, 300),
    "int_pow_negative_scalar": lambda d: I.to(d) ** -1,
    "int_add_float_alpha": lambda d: I.to(d).add(I.to(d), alpha=1.5),
    "int_sub__float_alpha": lambda d: I.clone().to(d).sub_(I.to(d), alpha=0.5),
    # class-index losses
    "cross_entropy_2d_class_target": lambda d: F.cross_entropy(X.to(d), torch.zeros(2, 2, dtype=torch.long).to(d)),
    "cross_entropy_probabilities_of_wrong_shape": lambda d: F.cross_entropy(X.to(d), X[:, :2].to(d)),
    "nll_loss_int32_target": lambda d: F.nll_loss(X.to(d), I[:2].int().to(d)),
    "nll_loss_float_target": lambda d: F.nll_loss(X.to(d), torch.zeros(2).to(d)),
    "nll_loss_weight_size": lambda d: F.nll_loss(X.to(d), I[:2].to(d), weight=torch.ones(2).to(d)),
    "nll_loss2d_target_dims": lambda d: F.nll_loss(IMG.to(d), torch.zeros(1, 5, dtype=torch.long).to(d)),
    "nll_loss2d_size_mismatch": lambda d: F.nll_loss(IMG.to(d), torch.zeros(1, 5, 4, dtype=torch.long).to(d)),
    "smooth_l1_negative_beta": lambda d: F.smooth_l1_loss(X.to(d), X.to(d), beta=-1.0),
    "multinomial_more_than_categories": lambda d: torch.multinomial(X.abs().to(d), 4),
    "multinomial_zero_samples": lambda d: torch.multinomial(X.abs().to(d), 0),
    "multinomial_3d": lambda d: torch.multinomial(X.abs()[None].to(d), 1),
    "multinomial_long": lambda d: torch.multinomial(I.to(d), 1),
    # mixed dtypes (a differential fuzz of 42 binary ops over 11 dtypes found them computed)
    "heaviside_float_double": lambda d: torch.heaviside(X.to(d), X.double().to(d)),
    "heaviside_float_0dim_long": lambda d: torch.heaviside(X.to(d), torch.tensor(1).to(d)),
    "complex_float_double": lambda d: torch.complex(X.to(d), X.double().to(d)),
    "complex_of_bfloat16": lambda d: torch.complex(X.bfloat16().to(d), X.bfloat16().to(d)),
    "complex_half_int8": lambda d: torch.complex(X.half().to(d), I[:1].to(torch.int8).to(d)),
    "polar_double_float": lambda d: torch.polar(X.double().to(d), X.to(d)),
    "clamp_float_complex_bound": lambda d: X.to(d).clamp(min=1.5j),
    "index_add_double_source": lambda d: X[0].to(d).index_add(0, I[:2].to(d), X[1, :2].double().to(d)),
    "index_add__long_source": lambda d: X[0].to(d).index_add_(0, I[:2].to(d), I[:2].to(d)),
    "index_copy_half_source": lambda d: X[0].to(d).index_copy(0, I[:2].to(d), X[1, :2].half().to(d)),
    "index_reduce_double_source": lambda d: X[0].to(d).index_reduce(0, I[:2].to(d), X[1, :2].double().to(d),
                                                                    "prod"),
    "put_double_source": lambda d: X[0].to(d).put(I[:2].to(d), X[1, :2].double().to(d)),
    # random ops of dtypes eager's CPU kernels lack (their meta kernels take any)
    "bernoulli_of_long_probabilities": lambda d: torch.bernoulli(I.to(d)),
    "bernoulli_of_bool_probabilities": lambda d: torch.bernoulli((I > 0).to(d)),
    "bernoulli_of_complex": lambda d: torch.bernoulli(X.to(torch.complex64).to(d)),
    "bernoulli__complex_scalar_p": lambda d: X.to(torch.complex64).to(d).bernoulli_(0.5),
    "bernoulli__complex_self_tensor_p": lambda d: X.to(torch.complex64).to(d).bernoulli_(X.abs().clamp(max=1).to(d)),
    "bernoulli__int_tensor_p": lambda d: X.clone().to(d).bernoulli_(I.to(d)),
    "randint_bool_from_out_of_range": lambda d: torch.randint(3, 9, (2,), dtype=torch.bool, device=d),
    "randint_like_int8_high_out_of_range": lambda d: torch.randint_like(I.to(torch.int8).to(d), 200),
    "randint_empty_range": lambda d: torch.randint(5, 3, (2,), device=d),
    "randint_like_complex": lambda d: torch.randint_like(X.to(torch.complex64).to(d), 5),
    "randint_complex_dtype": lambda d: torch.randint(0, 5, (2,), dtype=torch.complex128, device=d),
    "random__complex": lambda d: X.to(torch.complex64).to(d).random_(),
    "randperm_bool": lambda d: torch.randperm(3, dtype=torch.bool, device=d),
    "randperm_complex": lambda d: torch.randperm(3, dtype=torch.complex64, device=d),
    "normal_complex_std": lambda d: torch.normal(X.to(d), X.abs().to(torch.complex64).to(d)),
    "alpha_dropout_complex": lambda d: F.alpha_dropout(X.to(torch.complex64).to(d), 0.5, True),
    "native_dropout_long": lambda d: torch.native_dropout(I.to(d), 0.5, True),
    "native_dropout_bool_p_one": lambda d: torch.native_dropout((I > 0).to(d), 1.0, True),
    "native_dropout_int8_p_zero": lambda d: torch.native_dropout(I.to(torch.int8).to(d), 0.0, None),
    # complex Python scalars into real tensors: one with an imaginary part does not convert
    "fill__long_complex": lambda d: I.clone().to(d).fill_(1 + 1j),
    "full_int8_complex_overflow": lambda d: torch.full((2,), 300 + 0j, dtype=torch.int8, device=d),
    "masked_fill_long_complex": lambda d: I.to(d).masked_fill(I.to(d) > 0, 2 + 1j),
    "index_fill_float_complex": lambda d: X.to(d).index_fill(0, I[:1].to(d), 2 + 0j),
    "clamp__float_complex_bound": lambda d: X.clone().to(d).clamp_(max=1 + 1j),
    # segment_reduce: eager's checks of the reduction's name, the lengths' rank and the dtypes
    "segment_reduce_of_long": lambda d: torch.segment_reduce(I.to(d), "sum", lengths=I[1:].to(d)),
    "segment_reduce_of_bool": lambda d: torch.segment_reduce((I > 0).to(d), "max", lengths=I[1:].to(d)),
    "segment_reduce_of_complex": lambda d: torch.segment_reduce(
        X[0].to(torch.complex64).to(d), "mean", lengths=I[1:].to(d)),
    "segment_reduce_unknown_reduction": lambda d: torch.segment_reduce(X[0].to(d), "median", lengths=I[1:].to(d)),
    "segment_reduce_lengths_of_higher_rank": lambda d: torch.segment_reduce(X[0].to(d), "sum", lengths=I[None, 1:].to(d)),
    "segment_reduce_float_lengths": lambda d: torch.segment_reduce(X[0].to(d), "sum", lengths=X[0, :2].to(d)),
    "segment_reduce_float_offsets": lambda d: torch.segment_reduce(X[0].to(d), "sum", offsets=X[0].to(d)),
    # a 0-d input takes one index (compiled with grad, the backward's check aborted the process)
    "index_select_of_a_scalar_two_indices": lambda d: torch.tensor(3.5, device=d).index_select(
        0, torch.tensor([0, 0], device=d)),
    # a source of another shape outside `dim` was added as if broadcast
    "index_add_source_of_another_width": lambda d: X.to(d).index_add(0, I[:1].to(d), torch.ones(1, 4, device=d)),
    "index_add_source_of_another_height": lambda d: X.to(d).index_add(1, I[:1].to(d), torch.ones(3, 1, device=d)),
    "index_add_to_a_scalar_from_a_vector": lambda d: torch.tensor(3.5, device=d).index_add(
        0, I[:1].to(d), torch.tensor([2.0], device=d)),
    "index_reduce_source_of_another_width": lambda d: X.to(d).index_reduce(
        0, I[:1].to(d), torch.ones(1, 4, device=d), "prod"),
}


@pytest.mark.parametrize("fn", BAD.values(), ids=BAD.keys())
def test_bad_arguments_raise_eager_error_at_the_call(fn):
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        fn(D)  # no .cpu(): at the call, before any sync
    first = str(cpu.value).split(",")[0].split(":")[0].lower()
    assert first in str(dev.value).lower(), (str(cpu.value), str(dev.value))


GOOD = {
    "softmax_last": lambda d: X.to(d).softmax(-1),
    "conv_padding_stride": lambda d: F.conv2d(IMG.to(d), W.to(d), torch.randn(4).to(d), stride=2, padding=1),
    "conv_groups": lambda d: F.conv1d(IMG[0, :, 0][None].to(d), torch.randn(3, 1, 3).to(d), groups=3),
    "conv_transpose_output_padding": lambda d: F.conv_transpose1d(
        torch.randn(1, 4, 5).to(d), torch.randn(4, 2, 3).to(d), stride=2, output_padding=1),
    "addmm_cpu_scalar_bias": lambda d: torch.addmm(torch.tensor(1.0), X.to(d), torch.randn(3, 2).to(d)),
    "setitem_int_with_float_scalar": lambda d: I.clone().to(d).index_put_((torch.tensor([0]).to(d),), torch.tensor(7)),
    "index_with_int_tensors_broadcasting": lambda d: X.to(d)[torch.tensor([[0], [1]]).to(d), torch.tensor([0, 2]).to(d)],
    "index_with_bool_mask": lambda d: X.to(d)[torch.tensor([True, False]).to(d)],
    "clamp_min_only": lambda d: torch.clamp(X.to(d), min=0.0),
    "softmax_of_int_to_float": lambda d: I.to(d).softmax(0, dtype=torch.float32),
    "max_pool1d_empty_batch": lambda d: F.max_pool1d(torch.zeros(0, 1, 4).to(d), 2),
    "max_pool2d_empty_batch": lambda d: F.max_pool2d(torch.zeros(0, 1, 4, 4).to(d), 2),
    # scalars eager accepts: wrapped, in range, or checked by value only where eager checks them
    "fill__uint8_minus_one_wraps": lambda d: I.to(torch.uint8).to(d).fill_(-1),
    "add_int8_scalar_wraps": lambda d: I.to(torch.int8).to(d) + 300,
    "fill__bool_two": lambda d: torch.zeros(2, dtype=torch.bool).to(d).fill_(2),
    "index_fill__zero_dim_index": lambda d: X.clone().to(d).index_fill_(1, torch.tensor(2).to(d), -1.0),
    "masked_fill_zero_dim_mask": lambda d: X.to(d).masked_fill(torch.tensor(True).to(d), 2.0),
    "clamp_zero_dim_tensor_bounds": lambda d: X.to(d).clamp(torch.tensor(-0.5).to(d), torch.tensor(0.5).to(d)),
    "where_scalar_in_range": lambda d: torch.where(X.to(d) > 0, X.to(d), 0.0),
    "float_pow_negative_scalar": lambda d: X.to(d) ** -2,
    "int_add_int_alpha": lambda d: I.to(d).add(I.to(d), alpha=3),
    "full_bool": lambda d: torch.full((2,), True, device=d),
    "new_full_in_range": lambda d: X.to(d).new_full((2, 2), 7.0),
    "full_like_in_range": lambda d: torch.full_like(I.to(d), -4),
    "lerp_scalar_weight": lambda d: torch.lerp(X.to(d), X.to(d) * 2, 0.25),
    "hardtanh_bounds": lambda d: F.hardtanh(X.to(d), -0.5, 0.5),
    "random__int64_from_only": lambda d: I.clone().to(d).random_(3).clamp(0, 2) * 0,
    "uniform__half_in_range": lambda d: torch.zeros(3, dtype=torch.float16).to(d).uniform_(1, 1),
    "cross_entropy_probabilities": lambda d: F.cross_entropy(X.to(d), X.softmax(1).to(d)),
    "cross_entropy_no_batch": lambda d: F.cross_entropy(X[0].to(d), torch.tensor(2).to(d)),
    "cross_entropy_spatial_weighted": lambda d: F.cross_entropy(
        IMG.to(d), torch.tensor([[[0, 1, 2, 0, 1]] * 5]).to(d), weight=torch.tensor([1.0, 2.0, 3.0]).to(d)),
    "smooth_l1_zero_beta": lambda d: F.smooth_l1_loss(X.to(d), X.flip(0).to(d), beta=0.0),
    "multinomial_all_categories": lambda d: torch.multinomial(X.abs().to(d), 3).sort(-1).values,
    # complex Python scalars of zero imaginary part convert; to bool, any nonzero one is True
    "clamp_float_by_complex_without_imaginary_part": lambda d: X.to(d).clamp(min=0.5 + 0j),
    "clamp__float_by_complex_without_imaginary_part": lambda d: X.clone().to(d).clamp_(max=0.5 + 0j),
    "masked_fill_long_real_complex": lambda d: I.to(d).masked_fill(I.to(d) > 0, 2.7 + 0j),
    "masked_fill_bool_imaginary": lambda d: (I > 5).to(d).masked_fill(I.to(d) > 0, 1.5j),
    "masked_fill_long_cpu_complex_tensor": lambda d: I.to(d).masked_fill(I.to(d) > 0, torch.tensor(2.7 + 0j)),
    "masked_fill_long_complex_tensor": lambda d: I.to(d).masked_fill(I.to(d) > 0, torch.tensor(2.7 + 0j).to(d)),
    "full_bool_imaginary": lambda d: torch.full((2,), 1.5j, dtype=torch.bool, device=d),
    "new_full_bool_imaginary": lambda d: (I > 0).to(d).new_full((2,), 1.5j),
    "fill__bool_imaginary": lambda d: (I > 5).to(d).fill_(1.5j),
    "bernoulli__int_self_float_p": lambda d: I.clone().to(d).bernoulli_(torch.zeros(3).to(d)),
    "randint_like_complex_to_long": lambda d: torch.randint_like(X.to(torch.complex64).to(d), 1, dtype=torch.long),
    "random__bfloat16_from_only": lambda d: X.bfloat16().to(d).random_(3).clamp(0, 2) * 0,
    "native_dropout_long_eval": lambda d: torch.native_dropout(I.to(d), 0.5, False)[0],
    "native_dropout_complex_p_one": lambda d: torch.native_dropout(X.to(torch.complex64).to(d), 1.0, True)[0],
}


@pytest.mark.parametrize("fn", GOOD.values(), ids=GOOD.keys())
def test_good_arguments_still_record(fn):
    torch.manual_seed(0)
    expected = fn("cpu")
    torch.manual_seed(0)
    torch.testing.assert_close(fn(D).cpu(), expected, rtol=1e-5, atol=1e-5)


VALUES_AFTER_A_GOOD_ONE = {
    "fill_": lambda d, v: I.to(torch.int8).to(d).fill_(v),
    "full": lambda d, v: torch.full((2,), v, dtype=torch.int8, device=d),
    "masked_fill": lambda d, v: I.to(torch.int8).to(d).masked_fill(I.to(d) > 0, v),
    "clamp": lambda d, v: I.to(torch.int8).to(d).clamp(max=v),
    "where": lambda d, v: torch.where(I.to(d) > 0, I.to(torch.int8).to(d), v),
    "pow": lambda d, v: I.to(d) ** (-1 if v == 300 else 2),
    "add_alpha": lambda d, v: I.to(d).add(I.to(d), alpha=1.5 if v == 300 else 2),
}


@pytest.mark.parametrize("fn", VALUES_AFTER_A_GOOD_ONE.values(), ids=VALUES_AFTER_A_GOOD_ONE.keys())
def test_scalar_values_are_checked_on_every_call(fn):
    """Fill values, clamp bounds, exponents and alpha are runtime values, not part of the op's
    signature: a value eager rejects, after one it accepts, passed silently."""
    fn(D, 1)
    with pytest.raises(RuntimeError) as cpu:
        fn("cpu", 300)
    with pytest.raises(RuntimeError, match=str(cpu.value)[:30]):
        fn(D, 300)


def test_common_large_fill_values_stay_cheap_and_accepted():
    mask = X.to(D) > 0
    assert X.to(D).masked_fill(mask, float("-inf")).cpu().isinf().any()
    torch.testing.assert_close(X.to(D).masked_fill(mask, -1e9).cpu(), X.masked_fill(X > 0, -1e9))
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        X.half().to(D).masked_fill(mask, -1e9)


def test_an_empty_out_tensor_is_not_an_empty_input():
    """The empty-input probe runs eager's kernel on zeros; an empty out= tensor (only resized)
    made it run lu_solve on zero pivots and raise eager's invalid-pivots error."""
    a, b = torch.randn(3, 3), torch.randn(3, 2)
    lu, piv = torch.linalg.lu_factor(a)
    out = torch.empty(0, device=D)
    torch.linalg.lu_solve(lu.to(D), piv.to(D), b.to(D), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.lu_solve(lu, piv, b), atol=1e-5, rtol=1e-5)
    with pytest.raises(IndexError, match="non-zero size"):  # a real empty input still raises
        torch.empty(0, 3, device=D).amax(0)



@pytest.mark.parametrize("on_device", [False, True], ids=["cpu_value", "device_value"])
def test_a_complex_tensor_value_with_an_imaginary_part_raises_at_the_read(on_device):
    # eager raises at the call; a 0-dim tensor's value is known only when the program runs
    value = torch.tensor(2 + 1j)
    with pytest.raises(RuntimeError, match="value cannot be converted to type"):
        I.to("cpu").masked_fill(I > 0, value)
    out = I.to(D).masked_fill(I.to(D) > 0, value.to(D) if on_device else value)
    with pytest.raises(RuntimeError, match="value cannot be converted to type"):
        out.cpu()


@pytest.mark.parametrize("value, dtype", [(300, torch.int8), (-256, torch.uint8), (127.9, torch.int8),
                                          (float("nan"), torch.int32), (1e10, torch.float16),
                                          (65520.0, torch.float16), (1e39, torch.float32)])
def test_a_0d_tensor_fill_value_the_dtype_cannot_hold_raises_at_the_read(value, dtype):
    """masked_fill and index_fill convert a 0-d tensor value's `.item()` with eager's overflow
    check (c10's `overflows`), which lazyxla gave as a wrapped or saturated value. In range, inf
    into a float dtype and a negative integer into uint8 down to -255 (which wraps) still fill."""
    x, mask, idx = torch.zeros(4, dtype=dtype), torch.tensor([True, False, True, False]), torch.tensor([1])
    v = torch.tensor(value, dtype=torch.float64 if isinstance(value, float) else torch.int64)
    for fill in (lambda x, m, i, v: x.masked_fill(m, v), lambda x, m, i, v: x.index_fill(0, i, v),
                 lambda x, m, i, v: x.clone().masked_fill_(m, v)):
        with pytest.raises(RuntimeError, match="value cannot be converted to type"):
            fill(x, mask, idx, v)
        out = fill(x.to(D), mask.to(D), idx.to(D), v.to(D))
        with pytest.raises(RuntimeError, match="value cannot be converted to type"):
            out.cpu()
    for ok, dt in ((-255, torch.uint8), (float("inf"), torch.float16), (127.0, torch.int8),
                   (-65504.0, torch.float16)):
        check(lambda x, m, i, v: (x.masked_fill(m, v), x.index_fill(0, i, v)),
              torch.zeros(4, dtype=dt), mask, idx, torch.tensor(ok))


def test_integer_ops_with_a_0d_value_the_dtype_cannot_hold_as_eager():
    """rsub with a bool 0-d tensor raises eager's bool-subtraction error (rsub carries no
    pointwise tag, so the dtype probe skipped it); an integer tensor to a power its dtype cannot
    hold raises eager's overflow error on every call (the probe ran once per signature, on the
    first exponent only); logical ops compare in the promoted dtype (256 against int8 is 0)."""
    x = torch.tensor([44, -1, 0, 3], dtype=torch.int8)
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        torch.rsub(x.to(D), torch.tensor(True, device=D))
    y = torch.tensor([1, 2], dtype=torch.int16)
    check(lambda y: y.pow(300), y)
    with pytest.raises(RuntimeError, match="cannot be converted to type int16_t without overflow"):
        y.to(D).pow(65537)
    for op in (torch.logical_and, torch.logical_or, torch.logical_xor):
        for v in (256, 3, 0):
            check(lambda x, t: (op(x, t), op(t, x)), x, torch.tensor(v))


_MASK = torch.tensor([True, False, True])
OUT_CALLS = {
    "index_copy": lambda d, out: torch.index_copy(X[0].to(d), 0, torch.tensor([2, 0], device=d),
                                                  torch.ones(2, device=d), out=out),
    "masked_fill_scalar": lambda d, out: torch.ops.aten.masked_fill.Scalar_out(X[0].to(d), _MASK.to(d), 2.0, out=out),
    "masked_fill_tensor": lambda d, out: torch.ops.aten.masked_fill.Tensor_out(
        X[0].to(d), _MASK.to(d), torch.tensor(3.0, device=d), out=out),
    "masked_scatter": lambda d, out: torch.ops.aten.masked_scatter.out(X[0].to(d), _MASK.to(d), X[1].to(d), out=out),
    "put": lambda d, out: torch.ops.aten.put.out(X[0].to(d), torch.tensor([0, 2], device=d),
                                                 torch.tensor([7.0, 8.0], device=d), out=out),
    "index_copy_bad_dtype": lambda d, out: torch.index_copy(X[0].to(d), 0, torch.tensor([2, 0], device=d),
                                                            torch.ones(2, dtype=torch.float64, device=d), out=out),
}


@pytest.mark.parametrize("fn", OUT_CALLS.values(), ids=OUT_CALLS.keys())
def test_out_overloads_of_checked_ops_run_their_checks(fn):
    """A check of an op's arguments (checks.py) also guards its out= overload, which passes the
    out= tensor on: index_copy(..., out=) raised a TypeError from the check before."""
    try:
        want = fn("cpu", torch.empty(3))
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            fn(D, torch.empty(3, device=D))
        assert str(got.value) == str(e)
        return
    out = torch.empty(3, device=D)
    got = fn(D, out)
    assert got is out
    torch.testing.assert_close(out.cpu(), want)

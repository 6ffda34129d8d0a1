"""Random ops' arguments that eager refuses at the call, refused by lazyxla at the call with
eager's error (lazyxla/lowering/checks.py), where it computed something else: a randperm its
dtype cannot hold (not a permutation), a bernoulli_ whose probabilities do not expand to self's
shape (a JAX broadcasting error at the read)."""
import pytest
import torch

import lazyxla

D = lazyxla.device()


@pytest.mark.parametrize("n, kwargs", [
    (129, {"dtype": torch.int8}),
    (257, {"dtype": torch.uint8}),
    (32769, {"dtype": torch.int16}),
    (2050, {"dtype": torch.float16}),
    (2 ** 24 + 2, {"dtype": torch.float32}),
    (300, {"dtype": torch.int8, "generator": torch.Generator()}),
], ids=["int8", "uint8", "int16", "float16", "float32", "int8_generator"])
def test_randperm_past_its_dtypes_range_raises_eagers_error(n, kwargs):
    with pytest.raises(RuntimeError) as cpu:
        torch.randperm(n, **kwargs)
    with pytest.raises(RuntimeError) as dev:
        torch.randperm(n, device=D, **kwargs)
    assert str(dev.value) == str(cpu.value)


def test_randperm_out_is_checked_by_the_out_dtype():
    with pytest.raises(RuntimeError, match="int8_t without overflow"):
        torch.randperm(300, out=torch.empty(0, dtype=torch.int8, device=D))
    with pytest.raises(NotImplementedError, match="'Bool'"):
        torch.randperm(3, out=torch.empty(0, dtype=torch.bool, device=D))


@pytest.mark.parametrize("n, dtype", [(128, torch.int8), (256, torch.uint8), (2049, torch.float16),
                                      (-5, torch.int8)])
def test_randperm_at_its_dtypes_limit_is_a_permutation(n, dtype):
    if n < 0:  # (eager's negative-size error, not an overflow)
        with pytest.raises(RuntimeError, match="negative dimension"):
            torch.randperm(n, dtype=dtype, device=D)
        return
    got = torch.randperm(n, dtype=dtype, device=D).cpu()
    assert got.dtype == dtype and sorted(got.long().tolist()) == list(range(n))


@pytest.mark.parametrize("shape, p_shape", [((2, 3), (2,)), ((2, 3), (6,)), ((2, 3), (1, 2, 3)),
                                            ((3,), (2, 3))])
def test_bernoulli_probabilities_must_expand_to_selfs_shape(shape, p_shape):
    p = torch.full(p_shape, 0.5)
    for fn in (lambda x, p: x.bernoulli_(p), torch.ops.aten.bernoulli.Tensor):
        with pytest.raises(RuntimeError) as cpu:
            fn(torch.empty(shape), p)
        with pytest.raises(RuntimeError) as dev:
            fn(torch.empty(shape, device=D), p.to(D))  # at the call
        assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("shape, p_shape", [((2, 3), (3,)), ((2, 3), (2, 1)), ((2, 3), ()),
                                            ((0, 3), (2,))])
def test_bernoulli_probabilities_that_expand_are_taken(shape, p_shape):
    """(eager returns at once for an empty self, whatever p's shape)"""
    got = torch.empty(shape, device=D).bernoulli_(torch.full(p_shape, 1.0, device=D)).cpu()
    assert torch.equal(got, torch.ones(shape))

"""The device RNG takes every seed eager takes: [-2**63, 2**64), a negative one modulo 2**64
(`manual_seed(-1)` is `manual_seed(2**64 - 1)`), and its state, torch.lazyxla.get_rng_state(), an
int64 [seed, counter], round-trips for each. A seed of 2**63 or more broke get_rng_state (and so
fork_rng and activation checkpointing): "Overflow when unpacking long long"."""
import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

import lazyxla

D = lazyxla.device()
SEEDS = [0, 7, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, -1, -2 ** 63]


@pytest.fixture(autouse=True)
def _reseed():
    yield
    torch.manual_seed(0)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_state_round_trips_for_every_seed(seed):
    torch.manual_seed(seed)
    assert torch.lazyxla.initial_seed() == torch.initial_seed() == seed % 2 ** 64
    state = torch.lazyxla.get_rng_state()
    assert state.dtype == torch.int64 and state.shape == (2,)
    first = torch.rand(3, device=D).cpu()
    torch.lazyxla.set_rng_state(state)
    assert torch.equal(torch.rand(3, device=D).cpu(), first)
    assert torch.lazyxla.initial_seed() == seed % 2 ** 64


def test_a_negative_seed_is_the_seed_modulo_2_64_as_in_eager():
    torch.manual_seed(-1)
    a = torch.rand(4, device=D).cpu()
    torch.manual_seed(2 ** 64 - 1)
    assert torch.equal(torch.rand(4, device=D).cpu(), a)
    torch.manual_seed(2 ** 63)
    assert not torch.equal(torch.rand(4, device=D).cpu(), a)


@pytest.mark.parametrize("seed", [2 ** 64, -2 ** 63 - 1])
def test_a_seed_out_of_range_raises_eagers_error_and_keeps_the_state(seed):
    torch.manual_seed(5)
    state = torch.lazyxla.get_rng_state()
    with pytest.raises(ValueError) as cpu:
        torch.default_generator.manual_seed(seed)
    with pytest.raises(ValueError) as dev:
        torch.manual_seed(seed)  # (seeds the device before the CPU)
    assert str(dev.value) == str(cpu.value)
    assert torch.equal(torch.lazyxla.get_rng_state(), state)


def test_fork_rng_and_checkpointing_with_a_seed_past_2_63():
    torch.manual_seed(2 ** 63 + 5)
    with torch.random.fork_rng(device_type="lazyxla"):
        inside = torch.rand(3, device=D).cpu()
    assert torch.equal(torch.rand(3, device=D).cpu(), inside)  # restored
    x = torch.ones(8, device=D, requires_grad=True)
    y = checkpoint.checkpoint(lambda x: F.dropout(x, 0.5) * 2, x, use_reentrant=False)
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), y.detach().cpu())  # the recomputed mask is the same


BAD_STATES = {  # state -> (error type, the start of its message)
    "uint8_16_bytes": (torch.zeros(16, dtype=torch.uint8), TypeError,
                       "RNG state must be a torch.LongTensor"),
    "float": (torch.zeros(2), TypeError, "RNG state must be a torch.LongTensor"),
    "list": ([1, 2], TypeError, "RNG state must be a torch.LongTensor"),
    "three_longs": (torch.zeros(3, dtype=torch.int64), RuntimeError,
                    "Expected a lazyxla RNG state of size 2 ([seed, counter]) but found the input RNG "
                    "state size to be 3"),
    "a_2d_state": (torch.zeros(1, 2, dtype=torch.int64), RuntimeError, "Expected a lazyxla RNG state of size 2"),
    "negative_counter": (torch.tensor([1, -1]), RuntimeError, "Invalid lazyxla RNG state"),
}


@pytest.mark.parametrize("case", BAD_STATES.values(), ids=BAD_STATES.keys())
def test_set_rng_state_refuses_what_get_rng_state_does_not_return(case):
    """As eager's CPU generator refuses another type ("RNG state must be a torch.ByteTensor") or
    size; the state is left as it was."""
    bad, error, message = case
    torch.manual_seed(3)
    state = torch.lazyxla.get_rng_state()
    with pytest.raises(error) as e:
        torch.lazyxla.set_rng_state(bad)
    assert str(e.value).startswith(message), str(e.value)
    assert torch.equal(torch.lazyxla.get_rng_state(), state)

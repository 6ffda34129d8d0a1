"""Waiting for results: on the CPU backend a wait polls for up to LAZYXLA_SPIN_WAIT_US before it
blocks (waking a blocked thread cost more than a small program's run); it always ends blocked on
every array, so a wait never returns early."""
import time

import jax
import jax.numpy as jnp
import pytest
import torch

import lazyxla
from lazyxla import jaxenv


class _Pending:
    """Stands in for a device array: ready after `polls` polls (never, if None); counts polls and
    blocks."""

    def __init__(self, polls):
        self.polls, self.seen, self.blocked = polls, 0, 0

    def is_ready(self):
        self.seen += 1
        return self.polls is not None and self.seen > self.polls

    def block_until_ready(self):
        self.blocked += 1
        return self

    def is_deleted(self):
        return False


@pytest.fixture
def spin(monkeypatch):
    def set_us(us):
        monkeypatch.setattr(jaxenv, "_spin_s", us * 1e-6)
        monkeypatch.setattr(jaxenv, "_last_wait", 0.0)
    return set_us


def test_a_result_ready_within_the_window_is_polled_for(spin):
    spin(300_000)
    a = _Pending(polls=5)
    jaxenv.wait_ready([a])
    assert a.seen == 6 and a.blocked == 1


def test_polling_stops_when_the_window_ends_and_the_wait_blocks(spin):
    spin(2000)
    a = _Pending(polls=None)
    t0 = time.perf_counter()
    jaxenv.wait_ready([a])
    assert time.perf_counter() - t0 < 0.5
    assert a.seen > 1 and a.blocked == 1


def test_after_a_wait_longer_than_the_window_the_next_one_blocks_at_once(spin):
    """Long programs gain nothing from polling; a short wait turns it back on."""
    spin(2000)
    jaxenv.wait_ready([_Pending(polls=None)])  # polled 2 ms, then blocked: longer than the window
    assert jaxenv._last_wait >= 2e-3
    a = _Pending(polls=None)
    jaxenv.wait_ready([a])
    assert a.seen == 0 and a.blocked == 1  # (it returned at once: a short wait)
    b = _Pending(polls=3)
    jaxenv.wait_ready([b])
    assert b.seen == 4


@pytest.mark.parametrize("us", [0, 300])
def test_an_array_a_later_program_took_as_donated_is_not_waited_for(spin, us):
    spin(us)
    consumed, kept = jnp.arange(3.0) + 1, jnp.arange(3.0) + 2
    consumed.delete()  # (what a donating run does to its input)
    jaxenv.wait_ready([consumed, kept])
    assert kept.is_ready()


def test_zero_blocks_at_once(spin):
    spin(0)
    a = _Pending(polls=None)
    jaxenv.wait_ready([a])
    assert a.seen == 0 and a.blocked == 1


def test_the_window_comes_from_the_environment(monkeypatch):
    monkeypatch.setattr(jaxenv, "_spin_s", None)
    monkeypatch.setenv("LAZYXLA_SPIN_WAIT_US", "120")
    assert jaxenv._spin_seconds() == pytest.approx(120e-6 if jax.default_backend() == "cpu" else 0)
    monkeypatch.setenv("LAZYXLA_SPIN_WAIT_US", "0")
    assert jaxenv._spin_seconds() == 0
    monkeypatch.setenv("LAZYXLA_SPIN_WAIT_US", "-3")
    with pytest.warns(UserWarning, match="LAZYXLA_SPIN_WAIT_US"):
        assert jaxenv._spin_seconds() == pytest.approx(
            300e-6 if jax.default_backend() == "cpu" else 0)


@pytest.mark.parametrize("us", [0, 50, 300_000])
def test_a_real_program_is_finished_when_the_wait_returns(spin, us):
    spin(us)
    f = jax.jit(lambda x: jax.lax.fori_loop(0, 200, lambda i, y: jnp.tanh(y @ x), x))
    x = jnp.full((128, 128), 0.01, jnp.float32)
    f(x).block_until_ready()
    outs = [f(x) for _ in range(3)]
    jaxenv.wait_ready(outs)
    assert all(o.is_ready() for o in outs)


def test_reads_and_sync_wait_for_their_values(spin):
    spin(300)
    x = torch.arange(6.0).reshape(2, 3).to(lazyxla.device())
    y = (x * 2).sum()
    lazyxla.sync()
    lazyxla.wait()
    assert y.item() == 30.0
    assert ((x + 1).cpu().tolist()) == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]

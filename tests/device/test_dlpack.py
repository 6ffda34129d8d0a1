"""DLPack export: a lazyxla tensor's consumers get a copy of its current value on JAX's device."""
import jax
import numpy as np
import pytest
import torch
import torch.utils.dlpack as dl

import lazyxla

D = lazyxla.device()


def _pending():
    return torch.arange(6.0, device=D).reshape(2, 3) * 2  # not yet executed


def test_consumers_read_the_current_value():
    t = _pending()
    expected = (torch.arange(6.0).reshape(2, 3) * 2).numpy()
    np.testing.assert_array_equal(np.from_dlpack(t), expected)
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(t)), expected)
    np.testing.assert_array_equal(np.from_dlpack(t.t()[1:]), expected.T[1:])  # a view: its values
    assert t.__dlpack_device__()[0] == dl.DLDeviceType.kDLCPU  # JAX's device here


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.bfloat16, torch.float64])
def test_dtypes_survive_a_capsule(dtype):
    x = torch.tensor([0, 1, 2], dtype=dtype)
    back = torch.from_dlpack(dl.to_dlpack(x.to(D)))
    assert back.dtype == dtype and back.device.type == "cpu"
    torch.testing.assert_close(back, x)


def test_the_capsule_is_a_copy_so_writes_cannot_reach_the_device():
    t = _pending()
    received = torch.from_dlpack(dl.to_dlpack(t))
    received[0, 0] = 100
    assert t[0, 0].item() == 0
    with pytest.raises(BufferError, match="copy"):
        t.__dlpack__(copy=False)


def test_from_dlpack_of_a_lazyxla_tensor_shares_its_storage_as_eager_does():
    t = _pending()
    alias = torch.from_dlpack(t)
    assert alias.device == t.device
    alias.add_(1)
    assert t[0, 1].item() == 3
    assert torch.from_dlpack(t, device="cpu").device.type == "cpu"


def test_eager_refusals_are_kept():
    with pytest.raises(BufferError, match="require gradient"):
        torch.ones(2, device=D, requires_grad=True).__dlpack__()
    cpu = torch.ones(2)
    assert torch.from_dlpack(dl.to_dlpack(cpu)).data_ptr() == cpu.data_ptr()  # CPU unchanged

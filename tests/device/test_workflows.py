"""Training-script plumbing around the device behaves as eager's: checkpoint files loaded straight
onto lazyxla, activation checkpointing with dropout, DataLoader(pin_memory=True)."""
import io

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

import lazyxla
from lazyxla.ir import buffer as buf

D = lazyxla.device()
X = torch.arange(6.0)
STATE = {"w": X, "tail": X[2:], "half": torch.arange(4, dtype=torch.float16), "long": torch.arange(3),
         "param": torch.nn.Parameter(torch.ones(2, 3)), "transposed": torch.arange(6.0).view(2, 3).t()}


def _saved(state):
    f = io.BytesIO()
    torch.save(state, f)
    f.seek(0)
    return f


@pytest.mark.parametrize("location", ["lazyxla", "lazyxla:0", D, {"cpu": "lazyxla:0"}],
                         ids=["str", "str_index", "device", "dict"])
def test_torch_load_onto_lazyxla(location):
    loaded = torch.load(_saved(STATE), map_location=location)
    for k, v in STATE.items():
        assert loaded[k].device.type == "lazyxla" and type(loaded[k]) is type(v), k
        assert loaded[k].stride() == v.stride() and loaded[k].storage_offset() == v.storage_offset(), k
        torch.testing.assert_close(loaded[k].cpu(), v.detach())
    assert loaded["param"].requires_grad
    loaded["tail"][0] = 100.0  # saved on one storage: they share one buffer again, as in eager
    assert loaded["w"][2].item() == 100.0
    assert buf.state_of(loaded["w"]).root is buf.state_of(loaded["tail"]).root


def test_torch_load_of_lazyxla_tensors_anywhere():
    f = _saved({k: v.to(D) for k, v in STATE.items()})
    for location, device in ((None, "lazyxla"), ("cpu", "cpu"), ("lazyxla", "lazyxla")):
        f.seek(0)
        loaded = torch.load(f, map_location=location)
        for k, v in STATE.items():
            assert loaded[k].device.type == device
            torch.testing.assert_close(loaded[k].cpu(), v.detach())
    f.seek(0)
    with pytest.raises(RuntimeError, match="invalid device index 1"):
        torch.load(f, map_location="lazyxla:1")


def test_state_dict_loaded_with_map_location_device():
    model = torch.nn.Linear(3, 2)
    target = torch.nn.Linear(3, 2).to(D)
    target.load_state_dict(torch.load(_saved(model.state_dict()), map_location=D))
    torch.testing.assert_close(target.weight.detach().cpu(), model.weight.detach())


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recomputes_dropout_with_the_forward_mask(reentrant):
    torch.manual_seed(0)
    x = torch.ones(4, 8, device=D, requires_grad=True)
    y = checkpoint.checkpoint(lambda t: F.dropout(t * 1.0, 0.5, True), x, use_reentrant=reentrant)
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), (y != 0).float().cpu() * 2)


@pytest.mark.filterwarnings("ignore:lazyxla. pin_memory")
def test_dataloader_pin_memory_is_a_no_op():
    """It raised NotImplementedError (PyTorch asks the accelerator for a pinned allocator)."""
    data = torch.utils.data.TensorDataset(torch.arange(8.0).view(4, 2))
    loader = torch.utils.data.DataLoader(data, batch_size=2, pin_memory=True)
    torch.testing.assert_close(torch.cat([b[0] for b in loader]), data.tensors[0])
    t = torch.ones(2)
    assert t.pin_memory() is t


def test_transformer_encoder_padding_mask_needs_no_nested_tensor():
    """Eval mode with a padding mask takes PyTorch's nested-tensor path: a clear error naming the
    remedy (it failed deep in the CPU fallback); with enable_nested_tensor=False it matches eager
    on every unpadded position."""
    torch.manual_seed(0)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    x = torch.randn(2, 5, 8)
    for nested in (True, False):
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested).eval()
        with torch.no_grad():
            expected = model(x, src_key_padding_mask=mask)
            model = model.to(D)
            if nested:
                with pytest.raises(NotImplementedError, match="enable_nested_tensor=False"):
                    model(x.to(D), src_key_padding_mask=mask.to(D))
                continue
            got = model(x.to(D), src_key_padding_mask=mask.to(D)).cpu()
        torch.testing.assert_close(got[~mask], expected[~mask], rtol=1e-4, atol=1e-5)

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


def _saved(state, zipped=True):
    f = io.BytesIO()
    torch.save(state, f, _use_new_zipfile_serialization=zipped)
    f.seek(0)
    return f


@pytest.mark.parametrize("location", ["lazyxla", "lazyxla:0", D, {"cpu": "lazyxla:0"}],
                         ids=["str", "str_index", "device", "dict"])
@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_torch_load_onto_lazyxla(location, zipped):
    """The legacy (non-zip) format used to fail: it reads a storage's bytes after placing it."""
    loaded = torch.load(_saved(STATE, zipped), map_location=location, weights_only=zipped)
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


def _data_records(f) -> int:
    import zipfile
    f.seek(0)
    return sum("/data/" in n for n in zipfile.ZipFile(f).namelist())


def _saved_state(device):
    """A base, views of it and a column-major result."""
    base = torch.arange(12.0).to(device)
    return {"base": base, "tail": base[4:], "grid": base.view(3, 4).t(), "colmajor": base.view(3, 4).t() * 2}


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
@pytest.mark.parametrize("location", [None, "cpu", "lazyxla"])
def test_torch_save_keeps_views_on_their_base_storage(location, zipped):
    """Saved as eager saves them: one storage per buffer, each tensor with eager's offset and
    strides. A view saved with its base used to load as a copy of its own."""
    expected, got = (_saved_state(d) for d in ("cpu", D))
    f = io.BytesIO()
    torch.save(got, f, _use_new_zipfile_serialization=zipped)
    if zipped:
        eager = io.BytesIO()
        torch.save(expected, eager)
        assert _data_records(f) == _data_records(eager) == 2  # the base's bytes once
    f.seek(0)
    loaded = torch.load(f, map_location=location, weights_only=zipped)
    for k, v in expected.items():
        t = loaded[k]
        assert t.device.type == (location or "lazyxla"), k
        assert (t.stride(), t.storage_offset(), t.dtype) == (v.stride(), v.storage_offset(), v.dtype), k
        torch.testing.assert_close(t.cpu(), v)
    loaded["tail"][0] = -1.0  # one storage again: the write reaches the base and its other views
    assert loaded["base"][4].item() == loaded["grid"][0, 1].item() == -1.0
    if location == "cpu":  # the column-major result's bytes in eager's memory order
        assert bytes(loaded["colmajor"].untyped_storage()) == bytes(expected["colmajor"].untyped_storage())


def test_torch_save_refuses_one_storage_in_two_dtypes_as_eager():
    for device in ("cpu", D):
        x = torch.arange(4.0, device=device)
        with pytest.raises(RuntimeError, match="view the same data as different types"):
            torch.save([x, x.view(torch.int32)], io.BytesIO())
        torch.load(_saved(x.view(torch.int32)))  # alone it saves


def test_torch_save_reads_the_current_value():
    x = torch.zeros(3, device=D)
    f1, f2 = io.BytesIO(), io.BytesIO()
    torch.save([x, x[1:]], f1)
    x.add_(1.0)
    torch.save([x, x[1:]], f2)
    for f, value in ((f1, 0.0), (f2, 1.0)):
        f.seek(0)
        for t in torch.load(f):
            assert t.cpu().eq(value).all()


def test_torch_save_of_parameters_conj_views_and_skip_data():
    p = torch.nn.Parameter(torch.ones(2, 3, device=D))
    c = (torch.arange(3.0) * 1j).to(D)
    loaded = torch.load(_saved({"p": p, "conj": c.conj()}))
    assert type(loaded["p"]) is torch.nn.Parameter and loaded["p"].requires_grad
    assert loaded["conj"].is_conj()
    torch.testing.assert_close(loaded["conj"].cpu(), c.cpu().conj())
    neg = c.conj().imag
    assert neg.is_neg()
    torch.testing.assert_close(torch.load(_saved(neg)).cpu(), c.cpu().conj().imag)
    f = io.BytesIO()
    with torch.serialization.skip_data():  # sizes and layouts only, as for CPU tensors
        torch.save({"p": p, "grid": torch.arange(6.0, device=D).view(2, 3).t()}, f)
    f.seek(0)
    meta = torch.load(f)
    assert meta["p"].shape == (2, 3) and meta["grid"].stride() == (1, 3)


def test_pickle_of_views_and_results():
    import pickle
    x = torch.arange(6.0, device=D).view(2, 3)
    for t in (x, x.t(), x[1:], x.t() * 2):
        back = pickle.loads(pickle.dumps(t))
        assert back.device.type == "lazyxla" and back.stride() == t.stride()
        torch.testing.assert_close(back.cpu(), t.cpu())


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


def test_sparse_layouts_raise_naming_the_remedy():
    """lazyxla has dense tensors only: making a sparse one, or an embedding whose backward would,
    raises saying so (the dispatcher's errors named neither the cause nor the remedy)."""
    x = torch.ones(2, 2, device=D)
    host = torch.eye(2)
    for make in (lambda: x.to_sparse(), lambda: x.to_sparse_csr(),
                 lambda: host.to_sparse().to(D), lambda: host.to_sparse_csr().to(D),
                 lambda: host.to_sparse_bsr((1, 1)).to(D),
                 lambda: torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]),
                                                 torch.ones(2), (2, 2), device=D)):
        with pytest.raises(NotImplementedError, match="dense \\(strided\\) tensors only"):
            make()
    for make in (lambda: torch.nested.nested_tensor([x[0], x[1, :1]]),
                 lambda: torch.nested.nested_tensor([host[0], host[1, :1]]).to(D)):
        with pytest.raises(NotImplementedError, match="lazyxla has no nested tensors"):
            make()
    torch.manual_seed(0)
    emb = torch.nn.Embedding(4, 3, sparse=True)
    ids = torch.tensor([1, 3])
    expected = emb(ids).detach()
    emb = emb.to(D)
    with pytest.raises(RuntimeError, match="sparse=False"):
        emb(ids.to(D))
    compiled = torch.compile(lambda i: emb(i).sum(), backend="lazyxla")
    with pytest.raises(Exception, match="sparse=False"):
        compiled(ids.to(D))
    with torch.no_grad():  # no gradient to make: sparse=True changes nothing
        torch.testing.assert_close(emb(ids.to(D)).cpu(), expected)
    emb.weight.requires_grad_(False)  # frozen: trains around it, compiled or not
    head = torch.nn.Linear(3, 1).to(D)
    torch.compile(lambda i: head(emb(i)).sum(), backend="lazyxla")(ids.to(D)).backward()
    head(emb(ids.to(D))).sum().backward()
    assert head.weight.grad is not None and emb.weight.grad is None


def test_untyped_storage_on_the_device():
    """torch.UntypedStorage(n, device="lazyxla") crashed the process (no device allocator)."""
    s = torch.UntypedStorage([1, 2, 3], device=D)
    assert s.device.type == "lazyxla" and s.nbytes() == 3
    assert s.cpu().tolist() == [1, 2, 3]
    assert torch.empty(0, dtype=torch.uint8, device=D).set_(s).cpu().tolist() == [1, 2, 3]
    assert torch.UntypedStorage(8, device="lazyxla").nbytes() == 8
    assert torch.UntypedStorage(4).device.type == "cpu"
    with pytest.raises(RuntimeError, match="invalid device index 1"):
        torch.UntypedStorage(4, device="lazyxla:1")


_DATASET = '''
import torch, lazyxla
class OnDevice(torch.utils.data.Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return torch.full((2,), float(i)).to(lazyxla.device()) + 1
class HeldOnDevice(torch.utils.data.Dataset):  # its data made on the device by the main process
    def __init__(self):
        self.data = (torch.arange(8.).reshape(4, 2) + 1).to(lazyxla.device()).bfloat16()
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return self.data[i].float()
'''
_LOADER = '''
import sys, torch, lazyxla
sys.path.insert(0, sys.argv[1])
from on_device import OnDevice, HeldOnDevice
if __name__ == "__main__":
    torch.ones(2, device=lazyxla.device()).cpu()  # the device runs in this process before workers
    try:
        dataset = HeldOnDevice() if sys.argv[3] == "held" else OnDevice()
        loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=1,
                                             multiprocessing_context=sys.argv[2])
        print([(b.device.type, b.cpu().tolist()) for b in loader])
    except RuntimeError as e:
        print("RuntimeError", str(e).splitlines()[-1])
'''


@pytest.mark.parametrize("context,dataset", [("fork", "made"), ("spawn", "made"), ("spawn", "held")])
def test_dataloader_workers_that_use_the_device(tmp_path, context, dataset):
    """A forked worker used to die with a segfault (JAX's runtime does not survive fork): it now
    raises an error naming the remedies. Spawned workers work: their batches travel as copies
    of their bytes (a lazyxla storage holds no memory to share) and arrive on the device. So does
    a dataset holding device data the main process made (the worker died on it: it was sent as
    a shared CPU copy, freed before the worker started)."""
    import subprocess
    import sys
    (tmp_path / "on_device.py").write_text(_DATASET)
    (tmp_path / "main.py").write_text(_LOADER)
    out = subprocess.run([sys.executable, str(tmp_path / "main.py"), str(tmp_path), context, dataset],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    if context == "fork":
        assert "lazyxla: the device cannot be used in a process forked after it started" in last, last
    elif dataset == "made":
        assert last == "[('lazyxla', [[1.0, 1.0], [2.0, 2.0]]), ('lazyxla', [[3.0, 3.0], [4.0, 4.0]])]", last
    else:
        assert last == "[('lazyxla', [[1.0, 2.0], [3.0, 4.0]]), ('lazyxla', [[5.0, 6.0], [7.0, 8.0]])]", last


@pytest.mark.parametrize("where", ["cpu", "lazyxla"])
def test_distributed_checkpoint_saves_and_loads_with_lazyxla_imported(tmp_path, where):
    # its writer asks an available device module for its stream: torch.lazyxla had none, so a
    # save of even a CPU state dict failed once lazyxla was imported
    import warnings
    import torch.distributed.checkpoint as dcp
    dev = torch.device(where) if where == "cpu" else D
    state = {"w": torch.arange(6.0, device=dev).reshape(2, 3) * 2, "tail": torch.ones(3, device=dev)[1:]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (no process group: DCP says so)
        dcp.save(state, checkpoint_id=str(tmp_path), no_dist=True)
        out = {"w": torch.zeros(2, 3, device=dev), "tail": torch.zeros(2, device=dev)}
        dcp.load(out, checkpoint_id=str(tmp_path), no_dist=True)
    assert out["w"].cpu().tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert out["tail"].cpu().tolist() == [1.0, 1.0]


def test_torch_save_of_synced_tensors_compiles_and_runs_nothing():
    # each tensor's bytes were read through a view of its buffer: a program per tensor saved,
    # compiled on the first save (4.5 s for 40 tensors of distinct shapes)
    from lazyxla import metrics
    state = {f"w{i}": torch.arange(float(i * 3 + 7), device=D).reshape(-1, 1) * 2 for i in range(6)}
    state["t"] = torch.arange(6.0).reshape(2, 3).t().contiguous().to(D)
    lazyxla.sync()
    compiles = metrics.counter_value("UncachedCompile") or 0
    f = io.BytesIO()
    torch.save(state, f)
    assert (metrics.counter_value("UncachedCompile") or 0) == compiles
    f.seek(0)
    back = torch.load(f, map_location="cpu")
    assert all(torch.equal(back[k], v.cpu()) for k, v in state.items())
    assert (metrics.counter_value("UncachedCompile") or 0) == compiles

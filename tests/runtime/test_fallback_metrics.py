import os
"""Ops with no lowering run on the CPU, counted and listed; the metrics API of torch_xla."""
import torch

import lazyxla
from lazyxla import metrics


def test_fallback_is_counted_listed_and_correct(fresh_metrics):
    x = torch.tensor([0.0, 3.0, 0.0, 5.0])
    nz = torch.nonzero(x.to(lazyxla.device()))  # data-dependent shape: CPU fallback
    torch.testing.assert_close(nz.cpu(), torch.nonzero(x))
    assert nz.device.type == "lazyxla"
    assert "nonzero" in metrics.executed_fallback_ops()
    assert metrics.counter_value("aten::nonzero") == 1
    sites = metrics.fallback_sites()["nonzero"]
    assert any("test_fallback_metrics.py" in s for s in sites)


def test_metrics_api_semantics(fresh_metrics):
    assert metrics.counter_value("NoSuchCounter") is None
    assert metrics.metric_data("NoSuchMetric") is None
    d = lazyxla.device()
    (torch.ones(3, device=d) + 1).cpu()
    assert "CompileTime" in metrics.metric_names() or metrics.counter_value("CachedCompile")
    count, total, samples = metrics.metric_data("ExecuteTime")
    assert count >= 1 and total > 0 and len(samples) == count
    assert "TransferFromDeviceTime" in metrics.metric_names()
    text = metrics.report()
    assert "Metric: ExecuteTime" in text and "Counter: MarkStep" not in text
    lazyxla.sync()
    assert "Counter: MarkStep" in metrics.report()
    metrics.clear_counters()
    assert metrics.counter_names() == [] and metrics.metric_names()
    metrics.clear_all()
    assert metrics.metric_names() == []


def test_saved_report_prints_and_a_bad_file_is_one_line(fresh_metrics, tmp_path, capsys):
    """A saved report is untrusted input: `lazyxla report FILE` prints a good one and names what
    is wrong with a missing, non-JSON, foreign or damaged one (exit status 1), no traceback."""
    import json
    from lazyxla import cli
    from lazyxla.report import load_report
    d = lazyxla.device()
    torch.nonzero(torch.tensor([0.0, 2.0]).to(d)).cpu()
    good = tmp_path / "run.json"
    lazyxla.save_report(str(good))
    assert cli.main(["report", str(good)]) == 0
    out = capsys.readouterr().out
    assert "lazyxla run report" in out and "nonzero" in out
    rep = json.loads(good.read_text())
    del rep["counters"]["ItemCall"]  # a report from a version that counted less
    good.write_text(json.dumps(rep))
    assert load_report(str(good))["counters"]["ItemCall"] == 0
    cases = {"missing.json": None, "text.json": "{\"counters\": ", "binary.json": b"\xff\xfe",
             "list.json": "[1, 2]",
             "retraces.json": dict(rep, retraces=5),
             "graph.json": dict(rep, graphs=[{"hash": 1}]),
             "sites.json": dict(rep, fallbacks=[{"op": "x", "count": 1, "sites": {"a": "b"}}]),
             "counters.json": dict(rep, counters={"MarkStep": "many"}),
             "offsets.json": dict(rep, graphs=[{"hash": "a", "ops": 1, "inputs": 1, "outputs": 1,
                                                "ms": 1.0, "offsets": "2"}]),
             "deep.json": "[" * 100000 + "]" * 100000}
    expected = {"missing.json": "No such file", "text.json": "not JSON text",
                "binary.json": "not JSON text", "list.json": "is not a lazyxla run report",
                "retraces.json": "retraces has the wrong type", "graph.json": "an entry of graphs",
                "sites.json": "sites must map", "counters.json": "counters must map",
                "offsets.json": "offsets must be int", "deep.json": "nested too deeply"}
    for name, content in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
        assert cli.main(["report", str(path)]) == 1, name
        err = capsys.readouterr().err
        assert err.startswith("lazyxla report: ") and expected[name] in err, (name, err)
        assert "Traceback" not in err
    # a string of the file reaches the terminal with its control characters escaped
    rep["retraces"] = [{"graph": "g", "cause": "x\x1b[2J\x1b]0;title\x07y"}]
    good.write_text(json.dumps(rep))
    assert cli.main(["report", str(good)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "x\\x1b[2J\\x1b]0;title\\x07y" in out
    # and a newline in it cannot forge a line of the report
    rep["retraces"] = [{"graph": "g", "cause": "x\nfallbacks (9): forged"}]
    good.write_text(json.dumps(rep))
    assert cli.main(["report", str(good)]) == 0
    out = capsys.readouterr().out
    assert "x\\nfallbacks (9): forged" in out and "\nfallbacks (9)" not in out
    # neither a FIFO (the read blocked) nor a device (/dev/zero: read without end) is read
    os.mkfifo(tmp_path / "fifo.json")
    for path in (tmp_path / "fifo.json", "/dev/zero", tmp_path):
        assert cli.main(["report", str(path)]) == 1
        err = capsys.readouterr().err
        assert "not a regular file" in err and "Traceback" not in err, err


def test_compiles_during_the_bridges_trial_runs_are_counted():
    # the bridge restores the counters after a trial run (its fallbacks are not the model's), and
    # so rolled back UncachedCompile of programs really compiled and cached meanwhile: the count
    # fell behind the compile events and CompileTime
    import torch
    import lazyxla
    from lazyxla import metrics

    @torch.compile(backend="lazyxla")
    def f(x, k, s):
        return (x * s)[:k].sum() + x.shape[0]
    import time
    before, start = metrics.counter_value("UncachedCompile") or 0, time.time()
    for n, k, s in [(8, 3, 1.0), (8, 3, 2.0), (9, 3, 2.0)]:
        f(torch.randn(n, 4, device=lazyxla.device()), k, s).item()
    compiles = (metrics.counter_value("UncachedCompile") or 0) - before
    assert compiles == len([e for e in metrics.events("compile") if e["time"] >= start]) > 0

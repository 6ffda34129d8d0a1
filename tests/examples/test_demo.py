"""The demo (lazyxla/examples/demo.py) in quick mode: the loss falls, nothing falls back to the CPU,
and the loss curve and run report are written."""
import json
import os

import torch

from lazyxla.examples import demo
from lazyxla.examples.gpt import GPT, GPTConfig


def test_demo_quick(tmp_path, capsys):
    torch._dynamo.reset()
    res = demo.run(quick=True, out_dir=str(tmp_path))
    out = capsys.readouterr().out
    assert len(res["losses"]) == demo.QUICK_STEPS
    assert res["losses"][-1] < res["losses"][0] - 0.5, res["losses"]
    assert res["fallbacks"] == []
    assert os.path.getsize(tmp_path / "loss_curve.png") > 1000
    with open(tmp_path / "loss_curve.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["fallbacks"] == [] and rep["counters"]["UncachedCompile"] == res["compiles"]
    # the model runs as torch.compile'd graphs (forward and backward each step), not in lazy mode
    assert rep["counters"]["DynamoExtractCompiledGraph"] >= 2
    assert rep["counters"]["RunCachedGraph"] >= 2 * demo.QUICK_STEPS
    # training compiles a fixed set of programs (forward, backward, optimizer step, ...), sampling
    # one more: the count must not grow with the number of steps
    assert 0 < res["compiles"] <= 10, res["compiles"]
    assert res["lazy_tokens_per_s"] > 0 and res["cpu_tokens_per_s"] > 0
    assert len(res["sample"]) == 40
    for needle in ("step", "tokens/s", "XLA compiles", "CPU fallbacks: 0", "lazyxla run report",
                   str(tmp_path)):
        assert needle in out


def test_corpus_is_deterministic():
    assert demo.make_corpus(2000, seed=1) == demo.make_corpus(2000, seed=1)
    text = demo.make_corpus(2000)
    assert len(set(text)) < 40 and text.endswith(". ")


def test_gpt_generate_cpu():
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16))
    out = m.generate(torch.zeros(1, 3, dtype=torch.long), 10)
    assert out.shape == (1, 13)
    assert m.head.weight is m.tok.weight


def test_step_counts_below_one_are_refused(capsys):
    import pytest
    from lazyxla import cli
    for bad in ("0", "-5", "x"):
        with pytest.raises(SystemExit) as e:
            cli.main(["demo", "--steps", bad])
        assert e.value.code == 2
        assert f"expected an integer >= 1, got '{bad}'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="at least one step"):
        demo.run(steps=0, verbose=False)


def test_ops_only_pattern_is_checked(capsys):
    """`lazyxla ops --only` with a broken regular expression, or one that matches no OpInfo
    entry (a typo), is a usage error, not an empty sweep that passes."""
    from lazyxla import cli
    assert cli.main(["ops", "--only", "(", "--quiet"]) == 2
    assert "is not a regular expression" in capsys.readouterr().err
    assert cli.main(["ops", "--only", "no_such_op_zz", "--quiet"]) == 2
    assert "no OpInfo entry matches --only 'no_such_op_zz'" in capsys.readouterr().err

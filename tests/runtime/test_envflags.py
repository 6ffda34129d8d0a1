"""Environment variables parse one way: yes/no words for flags, integers with a floor for counts;
anything else warns and keeps the default."""
import pytest

from lazyxla import envflags


@pytest.mark.parametrize("raw, expected", [("1", True), ("true", True), ("Yes", True), ("ON", True),
                                           ("0", False), ("false", False), ("No", False),
                                           (" off ", False)])
def test_flag_words(monkeypatch, raw, expected):
    monkeypatch.setenv("LAZYXLA_TEST_FLAG", raw)
    assert envflags.flag("LAZYXLA_TEST_FLAG", not expected) is expected


def test_flag_unset_or_empty_is_the_default(monkeypatch):
    monkeypatch.delenv("LAZYXLA_TEST_FLAG", raising=False)
    assert envflags.flag("LAZYXLA_TEST_FLAG", True) is True
    monkeypatch.setenv("LAZYXLA_TEST_FLAG", "")
    assert envflags.flag("LAZYXLA_TEST_FLAG", False) is False


def test_flag_that_does_not_parse_warns_and_keeps_the_default(monkeypatch):
    monkeypatch.setenv("LAZYXLA_TEST_FLAG", "maybe")
    with pytest.warns(UserWarning, match="LAZYXLA_TEST_FLAG='maybe'"):
        assert envflags.flag("LAZYXLA_TEST_FLAG", True) is True


def test_keep_tied_weights_false_opts_out(monkeypatch):
    """`false` used to mean keep: only "0" opted out."""
    monkeypatch.setenv("LAZYXLA_KEEP_TIED_WEIGHTS", "false")
    assert envflags.flag("LAZYXLA_KEEP_TIED_WEIGHTS", True) is False


def test_count(monkeypatch):
    monkeypatch.setenv("LAZYXLA_TEST_COUNT", "12")
    assert envflags.count("LAZYXLA_TEST_COUNT", 5, minimum=1) == 12
    monkeypatch.setenv("LAZYXLA_TEST_COUNT", "0")
    assert envflags.count("LAZYXLA_TEST_COUNT", 5, minimum=0) == 0
    for bad in ("0", "-3", "ten", "1.5"):
        monkeypatch.setenv("LAZYXLA_TEST_COUNT", bad)
        with pytest.warns(UserWarning, match="is not an integer from 1 to .*; using 5"):
            assert envflags.count("LAZYXLA_TEST_COUNT", 5, minimum=1) == 5


def test_a_count_past_its_maximum_is_refused(monkeypatch):
    # LAZYXLA_SPIN_WAIT_US of 400 nines made every read fail (an OverflowError converting it)
    monkeypatch.setenv("LAZYXLA_TEST_COUNT", "9" * 400)
    with pytest.warns(UserWarning, match="is not an integer from 0 to 1000000; using 300"):
        assert envflags.count("LAZYXLA_TEST_COUNT", 300, maximum=10 ** 6) == 300
    monkeypatch.setenv("LAZYXLA_TEST_COUNT", "1000000")
    assert envflags.count("LAZYXLA_TEST_COUNT", 300, maximum=10 ** 6) == 10 ** 6


def test_check_indices_reads_yes_no_and_on_as_every_other_flag(monkeypatch):
    # "no" warned and left the checks on (deferred)
    from lazyxla.lowering import registry
    for value, mode in (("no", "off"), ("0", "off"), ("yes", "strict"), ("on", "strict"),
                        ("deferred", "deferred"), ("", "deferred")):
        monkeypatch.setenv("LAZYXLA_CHECK_INDICES", value)
        assert registry._mode_from_env() == mode

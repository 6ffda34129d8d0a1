"""PyTorch's OpInfo database on the lazyxla device, compared with the CPU (see lazyxla/opinfo.py).

Fast mode (default): every OpInfo once, float32 (else its first supported dtype), first samples.
Full mode: LAZYXLA_OPINFO_FULL=1 pytest tests/opinfo -- every sample, float32/int64/bool/bfloat16.

An entry that FAILs must be listed in known_failures.txt (then it xfails); a listed entry that
passes fails the test, so the list only shrinks. Regenerate the list with
    .venv/bin/python -m lazyxla.opinfo --update-known-failures
"""
import pytest

from lazyxla import opinfo as O

FULL = O.full_mode_from_env()
KNOWN = O.parse_known_failures()
ENTRIES = O.entries(FULL)


def _id(entry):
    op, dtype = entry
    return f"{O.entry_name(op)}-{O.dtype_name(dtype) if dtype is not None else 'none'}"


@pytest.mark.timeout(600 if FULL else 120)
@pytest.mark.parametrize("entry", ENTRIES, ids=[_id(e) for e in ENTRIES])
def test_opinfo(entry):
    op, dtype = entry
    r = O.run_entry(op, dtype, FULL)
    if r.cls == O.SKIPPED:
        pytest.skip(r.reason)
    listed = O.expected_failing(KNOWN, r.key, FULL)
    if r.cls == O.FAIL:
        if listed:
            pytest.xfail(r.reason)
        pytest.fail(f"{r.key} FAILS and is not listed in tests/opinfo/known_failures.txt: {r.reason}\n"
                    "(fix it, or regenerate the list: python -m lazyxla.opinfo --update-known-failures)",
                    pytrace=False)
    if listed:
        pytest.fail(f"{r.key} now passes ({r.cls}) but tests/opinfo/known_failures.txt lists it: delete "
                    "its line", pytrace=False)


def test_known_failures_name_real_entries():
    """Every line names an OpInfo entry; untagged lines name entries the fast run runs."""
    fast = {f"{O.entry_name(op)} {O.dtype_name(d) if d is not None else '-'}" for op, d in O.entries(False)}
    names = {O.entry_name(op) for op in O.load_op_db()}
    bad = [k for k in KNOWN if k.split(" ")[0] not in names]
    assert not bad, f"known_failures.txt names unknown OpInfos: {bad}"
    untagged = [k for k, reason in KNOWN.items() if not O.is_full_only(reason) and k not in fast]
    assert not untagged, f"lines for entries the fast run does not run must be tagged {O.FULL_TAG}: {untagged}"

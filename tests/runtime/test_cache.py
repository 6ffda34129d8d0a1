"""Compilation cache: LRU eviction recompiles; the persistent cache survives processes."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.runtime import cache as cache_module
from lazyxla.runtime import executor


def test_eviction_recompiles_never_errors(fresh_metrics):
    old = executor.CACHE.capacity
    d = lazyxla.device()
    x = torch.ones(3, device=d)
    lazyxla.sync()
    lazyxla.set_cache_capacity(4)
    executor.CACHE.clear()
    metrics.clear_counters()
    try:
        hashes, inputs = [], []
        for k in range(6):  # 6 distinct programs through a cache of 4
            y = x
            for _ in range(k + 1):
                y = y * 2
            hashes.append(lazyxla.graph_hash([y]))
            inputs.append(lazyxla.graph_inputs([y]))
            lazyxla.warm_up_cache([y])
            lazyxla.clear_pending_ir()
        assert len(executor.CACHE) == 4
        assert metrics.counter_value("CompilationCacheEviction") == 2
        (out,) = lazyxla.run_cached_graph(hashes[0], inputs[0])  # evicted: rebuilt from its graph
        assert out.cpu().tolist() == [2.0] * 3
        assert metrics.counter_value("RecompileAfterEviction") == 1
    finally:
        lazyxla.set_cache_capacity(old)


@pytest.mark.skipif(cache_module.map_limit() is None, reason="no vm.max_map_count to read")
def test_a_compiled_function_runs_after_its_program_and_saved_graph_were_dropped(fresh_metrics):
    # the cache keeps 16 x capacity evicted programs' graphs: past that, the compiled call found
    # neither (KeyError: no compiled graph with hash ...)
    old = executor.CACHE.capacity
    d = lazyxla.device()
    try:
        lazyxla.set_cache_capacity(1)
        f = torch.compile(lambda x: (x * 3).sin() + 1, backend="lazyxla")
        x = torch.arange(4.0, device=d)
        lazyxla.sync()
        first = f(x).cpu()
        for k in range(20):  # 20 other programs: more graphs than the cache keeps for 1
            (x + torch.full((k + 1,), 1.0, device=d).sum()).cpu()
        torch.testing.assert_close(f(x).cpu(), first)
        assert metrics.counter_value("RecompileAfterEviction") == 1
    finally:
        lazyxla.set_cache_capacity(old)


def test_running_a_hashed_graph_compiled_for_the_first_time_is_no_recompile(fresh_metrics):
    # graph_hash then run_cached_graph (torch_xla's flow) counted a "recompile after eviction"
    x = torch.arange(3.0, device=lazyxla.device())
    y = x * 5 + 2
    h, inputs = lazyxla.graph_hash([y]), lazyxla.graph_inputs([y])
    lazyxla.clear_pending_ir()
    (out,) = lazyxla.run_cached_graph(h, inputs)
    assert out.cpu().tolist() == [2.0, 7.0, 12.0]
    assert (metrics.counter_value("RecompileAfterEviction") or 0) == 0


def test_the_cache_keeps_the_process_below_its_memory_map_cap(fresh_metrics, monkeypatch):
    """Every compiled program holds memory maps; at the system's cap (vm.max_map_count) LLVM could
    not map a new one and the process died. Here the cap is set just above today's maps."""
    d = lazyxla.device()
    x = torch.ones(3, device=d)
    lazyxla.sync()
    executor.CACHE.clear()
    base = cache_module.map_count()
    cap = int((base + 60) / cache_module._MAP_HIGH)  # room for about 20 small programs
    monkeypatch.setattr(cache_module, "map_limit", lambda: cap)
    monkeypatch.setattr(executor.CACHE, "_next_map_check", 0)  # counted from the next compile,
    monkeypatch.setattr(executor.CACHE, "_last_maps", None)     # then when half the room could
    monkeypatch.setattr(executor.CACHE, "_maps_per_put", 10.0)  # have been used at 10 a compile
    monkeypatch.setattr(executor.CACHE, "_warned_maps", False)

    def chain(t, n):  # n ops: a program per n
        for _ in range(n):
            t = t.tanh() * 1.5
        return t
    with pytest.warns(UserWarning, match="vm.max_map_count"):
        for n in range(1, 61):
            assert torch.allclose(chain(x, n).cpu(), chain(torch.ones(3), n))
            assert cache_module.map_count() <= cap * cache_module._MAP_HIGH + 30
    assert metrics.counter_value("MapLimitEviction") > 0
    assert 1 <= len(executor.CACHE) < 60
    assert torch.allclose(chain(x, 1).cpu(), chain(torch.ones(3), 1))  # evicted, compiled again
    assert "compiled programs evicted early at the memory-map cap" in lazyxla.report()


def test_maps_the_programs_do_not_hold_do_not_empty_the_cache(fresh_metrics, monkeypatch):
    """A process whose own maps (memory-mapped files, say) pass the mark: evicting frees none, so
    the cache stops after one round and does not evict again at every compile."""
    d = lazyxla.device()
    x = torch.ones(3, device=d)
    lazyxla.sync()
    executor.CACHE.clear()
    monkeypatch.setattr(cache_module, "map_limit", lambda: 1000)
    monkeypatch.setattr(cache_module, "map_count", lambda: 900)  # the process's own, not programs'
    monkeypatch.setattr(executor.CACHE, "_next_map_check", 0)
    monkeypatch.setattr(executor.CACHE, "_last_maps", None)
    monkeypatch.setattr(executor.CACHE, "_foreign_maps", 0)
    monkeypatch.setattr(executor.CACHE, "_warned_maps", True)
    for n in range(1, 31):
        y = x
        for _ in range(n):
            y = (y * 0.5).cos()
        y.cpu()
    assert metrics.counter_value("MapLimitEviction") <= 2  # one round, at the first count
    assert len(executor.CACHE) >= 28


def test_capacity_from_env(monkeypatch):
    from lazyxla.runtime.cache import CompilationCache
    monkeypatch.setenv("LAZYXLA_COMPILATION_CACHE_SIZE", "7")
    assert CompilationCache().capacity == 7
    monkeypatch.setenv("LAZYXLA_COMPILATION_CACHE_SIZE", "lots")
    with pytest.warns(UserWarning):
        assert CompilationCache().capacity == 2048


_PROGRAM = textwrap.dedent("""
    import sys, torch, lazyxla
    lazyxla.initialize_cache(sys.argv[1])
    d = lazyxla.device()
    x = torch.arange(8.0, device=d)
    y = (x * 3 + 1).cpu()
    assert y.tolist() == [3 * i + 1.0 for i in range(8)], y
    m = lazyxla.metrics
    print("HIT", m.counter_value("PersistentCacheHit") or 0, "MISS", m.counter_value("PersistentCacheMiss") or 0,
          "CORRUPT", m.counter_value("PersistentCacheCorrupt") or 0)
""")


def _run(path):
    out = subprocess.run([sys.executable, "-c", _PROGRAM, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("HIT")][-1].split()
    return {line[i]: int(line[i + 1]) for i in range(0, len(line), 2)}, out.stderr


def test_persistent_cache_across_processes(tmp_path):
    first, _ = _run(tmp_path)
    assert first["MISS"] >= 1 and first["HIT"] == 0
    second, _ = _run(tmp_path)
    assert second["HIT"] >= 1 and second["MISS"] == 0, "the second process must not compile"


def test_corrupt_persistent_entry_is_recompiled(tmp_path):
    _run(tmp_path)
    entries = [p for p in tmp_path.iterdir() if p.is_file() and not p.name.startswith(".")]
    assert entries
    for p in entries:
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0xFF
        p.write_bytes(bytes(data))
    third, err = _run(tmp_path)
    assert third["CORRUPT"] >= 1 and third["HIT"] == 0
    assert "integrity" in err
    fourth, _ = _run(tmp_path)  # the bad entry was replaced by a good one
    assert fourth["HIT"] >= 1 and fourth["CORRUPT"] == 0


def test_unusable_persistent_cache_path(tmp_path):
    """initialize_cache(path) raises a clear OSError for a path it cannot make a directory of;
    the same path from LAZYXLA_PERSISTENT_CACHE_PATH is a warning at import, and the process
    runs on without a persistent cache."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError, match="cannot make the persistent cache directory"):
        lazyxla.initialize_cache(str(blocker / "cache"))
    with pytest.raises(OSError, match="cannot make the persistent cache directory"):
        lazyxla.initialize_cache(str(blocker))
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        lazyxla.initialize_cache(str(blocker), readonly=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        lazyxla.initialize_cache(str(tmp_path / "nowhere"), readonly=True)
    for blank in ("", "  "):  # (not the working directory)
        with pytest.raises(ValueError, match="path is empty"):
            lazyxla.initialize_cache(blank)
    with pytest.raises(ValueError, match="is a URL"):
        lazyxla.initialize_cache("gs://bucket/cache")
    env = dict(os.environ, LAZYXLA_PERSISTENT_CACHE_PATH=str(blocker / "cache"))
    program = ("import torch, lazyxla; d = lazyxla.device(); "
               "print('OK', (torch.arange(3.0, device=d) * 2).cpu().tolist(), "
               "lazyxla.runtime.cache.persistent_cache_path())")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "OK [0.0, 2.0, 4.0] None" in out.stdout
    assert "LAZYXLA_PERSISTENT_CACHE_PATH=" in out.stderr and "cannot be used" in out.stderr


_OP_PROGRAM = textwrap.dedent("""
    import sys, torch, lazyxla
    lazyxla.initialize_cache(sys.argv[1])
    op = getattr(torch, sys.argv[2])
    x = torch.arange(4.0) / 10
    y = op(x.to(lazyxla.device())).cpu()
    torch.testing.assert_close(y, op(x))
    m = lazyxla.metrics
    print("HIT", m.counter_value("PersistentCacheHit") or 0, "MISS", m.counter_value("PersistentCacheMiss") or 0,
          "CORRUPT", m.counter_value("PersistentCacheCorrupt") or 0)
""")


def _run_op(path, op):
    out = subprocess.run([sys.executable, "-c", _OP_PROGRAM, str(path), op], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("HIT")][-1].split()
    return {line[i]: int(line[i + 1]) for i in range(0, len(line), 2)}, out.stderr


def _entries(path):
    return {p.name for p in path.iterdir() if p.name.endswith("-cache")}


def test_an_entry_is_bound_to_its_program_links_are_not_followed_old_formats_are_replaced(tmp_path):
    """Untrusted entries: one copied under another program's key, intact, is rejected (it ran the
    other program: sigmoid's values for tanh); a link in the cache is never written through; an
    entry of an earlier version of the format is replaced without a warning."""
    cache = tmp_path / "cache"
    _run_op(cache, "tanh")
    tanh = _entries(cache)
    _run_op(cache, "sigmoid")
    (sigmoid,), (tanh,) = _entries(cache) - tanh, tanh
    (cache / tanh).write_bytes((cache / sigmoid).read_bytes())
    outside = tmp_path / "outside"
    (cache / sigmoid).unlink()
    (cache / sigmoid).symlink_to(outside)
    got, err = _run_op(cache, "tanh")  # (the program asserts its values)
    assert got["CORRUPT"] == 1 and "integrity" in err
    got, _ = _run_op(cache, "sigmoid")
    assert not outside.exists() and not (cache / sigmoid).is_symlink()
    assert got["MISS"] >= 1
    blob = (cache / tanh).read_bytes()
    (cache / tanh).write_bytes(b"LAZYXLA-CACHE-1\n" + blob[len(b"LAZYXLA-CACHE-2\n"):])
    got, err = _run_op(cache, "tanh")
    assert got["CORRUPT"] == 0 and got["HIT"] == 0 and "integrity" not in err
    got, _ = _run_op(cache, "tanh")
    assert got["HIT"] >= 1 and got["MISS"] == 0


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "directory"])
def test_an_entry_that_is_not_a_regular_file_is_discarded_unread(tmp_path, kind):
    """A FIFO in an entry's place blocked the first compile forever; a link to /dev/zero (or to a
    huge file) was read into memory without end; a directory was never replaced."""
    cache = tmp_path / "cache"
    _run_op(cache, "tanh")
    (entry,) = _entries(cache)
    (cache / entry).unlink()
    if kind == "fifo":
        os.mkfifo(cache / entry)
    elif kind == "directory":
        (cache / entry).mkdir()
    else:
        (cache / entry).symlink_to("/dev/zero")
    got, err = _run_op(cache, "tanh")  # (the program asserts its values)
    assert got["CORRUPT"] == 1 and "is not a regular file" in err
    got, _ = _run_op(cache, "tanh")  # replaced by a good entry
    assert got["HIT"] >= 1 and got["CORRUPT"] == 0


def test_jaxs_own_cache_variable_gets_lazyxlas_checks(tmp_path):
    """JAX_COMPILATION_CACHE_DIR turned on JAX's cache, which checks nothing: another program's
    entry under this program's name ran, with this program's inputs (wrong values, silently)."""
    program = _OP_PROGRAM.replace("lazyxla.initialize_cache(sys.argv[1])\n", "")
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path))

    def run(op):
        out = subprocess.run([sys.executable, "-c", program, "-", op], capture_output=True,
                             text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("HIT")][-1].split()
        return {line[i]: int(line[i + 1]) for i in range(0, len(line), 2)}, out.stderr
    run("tanh")
    tanh = _entries(tmp_path)
    run("sigmoid")
    (sigmoid,), (tanh,) = _entries(tmp_path) - tanh, tanh
    (tmp_path / tanh).write_bytes((tmp_path / sigmoid).read_bytes())
    got, err = run("tanh")  # (the program asserts its values)
    assert got["CORRUPT"] == 1 and "integrity" in err
    got, _ = run("tanh")
    assert got["HIT"] >= 1


def test_a_size_limited_cache_writes_beside_entries_written_without_a_limit(tmp_path):
    """JAX evicts by the access time each entry keeps in a `-atime` file, which it writes only
    under a size limit; its eviction failed on an entry without one, and from then on no program
    was written to the cache. Such an entry is now dated oldest, and evicted first."""
    cache = tmp_path / "cache"
    _run_op(cache, "tanh")  # (no size limit: no -atime file)
    (tanh,) = _entries(cache)
    assert not (cache / tanh.replace("-cache", "-atime")).exists()
    (cache / "dir-cache").write_bytes(b"x")  # a foreign entry whose -atime is a directory
    (cache / "dir-atime").mkdir()
    size = sum(p.stat().st_size for p in cache.iterdir() if p.is_file()) + 1
    env = dict(os.environ, JAX_COMPILATION_CACHE_MAX_SIZE=str(10 * size))
    out = subprocess.run([sys.executable, "-c", _OP_PROGRAM, str(cache), "sigmoid"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    written = _entries(cache) - {tanh, "dir-cache"}
    assert written, f"nothing was written: {out.stderr[-2000:]}"
    for entry in written | {tanh}:
        assert (cache / entry.replace("-cache", "-atime")).is_file()
    assert int.from_bytes((cache / tanh.replace("-cache", "-atime")).read_bytes(), "little") == 0


def test_initializing_the_same_cache_again_writable_makes_it_writable(tmp_path):
    # the second call compared the path alone, and left the cache read-only: nothing was written
    program = ("import sys, os, torch, lazyxla\n"
               "lazyxla.initialize_cache(sys.argv[1], readonly=True)\n"
               "lazyxla.initialize_cache(sys.argv[1])\n"
               "(torch.arange(5.0, device=lazyxla.device()) * 7).cpu()\n")
    out = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert _entries(tmp_path)


def test_assert_no_recompile_counts_across_a_clear_of_the_metrics_inside_it():
    # it subtracted counter values: a clear inside the block gave "-3 XLA compile(s)" where nothing
    # compiled, or 0 over a real compile
    d = lazyxla.device()
    x = torch.arange(4.0, device=d)
    lazyxla.sync()
    (x * 2).cpu()
    (x - 2).cpu()
    with lazyxla.assert_no_recompile():
        metrics.clear_all()
        (x * 2).cpu()
    with pytest.raises(lazyxla.RecompileError, match="^1 XLA compile"):
        with lazyxla.assert_no_recompile():
            metrics.clear_all()
            (x * 7 - 1).cos().cpu()

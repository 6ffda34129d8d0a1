"""The compilation cache: an in-memory LRU of executables keyed by graph hash, the specs needed to
rebuild an evicted executable, and the optional persistent cache on disk.

The persistent cache is JAX's own (it stores XLA's serialized executables, no pickle), with every
entry wrapped in a header carrying a SHA-256 of its payload and lazyxla's format version. An entry
that fails the check is reported (counter `PersistentCacheCorrupt`), removed and recompiled.
"""
from __future__ import annotations

import collections
import hashlib
import logging
import os
import shutil
import stat
import warnings

from lazyxla import envflags, metrics

log = logging.getLogger("lazyxla")

DEFAULT_CAPACITY = 2048

# Each executable holds XLA's JIT code in memory maps of its own, three per kernel (about 25 for a
# transformer block's program, 30 for a fuzz's programs of 30-45 ops). Linux caps the maps of a
# process (vm.max_map_count, 65530 by default); the fuzz passed it, after which LLVM could not map
# a new program ("Cannot allocate memory") and the process died. So the cache also evicts by the
# process's map count: above _MAP_HIGH of the cap, the least recently used executables until the
# count is below _MAP_LOW (the rest is left to the process's own maps; where evicting frees too
# few, the maps are the process's own, and the marks move above them). A count reads
# /proc/self/maps, 1.7 ms per 1000 maps, so it is taken when half the room left could have been
# used at the most maps per compile seen, and at least every _MAP_CHECK_MAX compiles.
_MAP_HIGH, _MAP_LOW = 0.6, 0.45
_MAP_CHECK_FIRST, _MAP_CHECK_MAX = 8, 256


def _capacity_from_env() -> int:
    return envflags.count("LAZYXLA_COMPILATION_CACHE_SIZE", DEFAULT_CAPACITY, minimum=1)


def map_limit() -> int | None:
    """The cap on this process's memory maps; None where there is none to read (not Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def map_count() -> int:
    with open("/proc/self/maps", "rb") as f:
        return f.read().count(b"\n")


class CompilationCache:
    def __init__(self, capacity: int | None = None):
        self.capacity = capacity or _capacity_from_env()
        self.executables: collections.OrderedDict = collections.OrderedDict()
        # Specs are small (structure only) and kept beyond eviction, bounded generously.
        self.specs: collections.OrderedDict = collections.OrderedDict()
        # hashes of programs evicted (at most 16 per slot, at least 4096): a recompile of one is
        # counted as such
        self.evicted: collections.OrderedDict = collections.OrderedDict()
        self._puts = 0
        self._warned_maps = False
        self._next_map_check = _MAP_CHECK_FIRST  # (in puts)
        self._last_maps = None  # (puts, maps) at the last count
        self._maps_per_put = 1.0  # the most seen between two counts
        self._foreign_maps = 0  # what evicting could not bring the count below

    def get(self, h):
        exe = self.executables.get(h)
        if exe is not None:
            self.executables.move_to_end(h)
        return exe

    def put(self, h, exe, spec) -> None:
        self.executables[h] = exe
        self.executables.move_to_end(h)
        self.remember(spec)
        while len(self.executables) > self.capacity:
            self.evict_oldest()
        self._puts += 1
        if self._puts >= self._next_map_check:
            self._keep_maps_below_the_cap()

    def evict_oldest(self) -> None:
        old, _ = self.executables.popitem(last=False)
        self._note_evicted(old)
        metrics.counter_inc("CompilationCacheEviction")
        log.debug("lazyxla: evicted compiled graph %s", old)

    def _keep_maps_below_the_cap(self) -> None:
        limit = map_limit()
        if limit is None:
            self._next_map_check = float("inf")
            return
        maps = map_count()
        if self._last_maps is not None:
            puts, before = self._last_maps
            self._maps_per_put = max(self._maps_per_put, (maps - before) / (self._puts - puts))
        # (maps the programs do not hold, if an eviction found some: the marks stand above them)
        high = max(_MAP_HIGH * limit, self._foreign_maps + 0.1 * limit)
        if maps > high:
            maps = self._evict_to(maps, max(_MAP_LOW * limit, self._foreign_maps), limit)
        self._last_maps = (self._puts, maps)
        self._next_map_check = self._puts + min(_MAP_CHECK_MAX, max(
            1, int((high - maps) / (2 * self._maps_per_put))))

    def _evict_to(self, maps: int, target: float, limit: int) -> int:
        """Evicts the least recently used executables until the process holds at most `target`
        maps, one executable is left, or evicting frees too few maps to be what holds them;
        returns the process's map count after."""
        evicted = 0
        for _ in range(8):  # (each round evicts about what the estimate says is over)
            if maps <= target or len(self.executables) <= 1:
                break
            per_executable = maps / len(self.executables)  # (an overestimate: the process's own
            n = min(int((maps - target) / per_executable) + 1,  # maps are counted in)
                    len(self.executables) - 1)
            for _ in range(n):
                self.evict_oldest()
            evicted += n
            before, maps = maps, map_count()
            if before - maps < n:  # (under a map per program freed: the rest is not theirs)
                self._foreign_maps = maps
                break
        metrics.counter_inc("MapLimitEviction", evicted)
        if not self._warned_maps:
            self._warned_maps = True
            warnings.warn(f"lazyxla: this process's memory maps neared the system's cap "
                          f"(vm.max_map_count {limit}: {maps} maps), each compiled program "
                          f"holding some: the compilation cache evicted {evicted} of them early, "
                          f"to be recompiled if used again; it keeps {len(self.executables)}. "
                          f"Raise vm.max_map_count to keep more", stacklevel=5)
        return maps

    def remember(self, spec) -> None:
        self.specs[spec.hash] = spec
        self.specs.move_to_end(spec.hash)
        while len(self.specs) > 16 * self.capacity:
            self.specs.popitem(last=False)

    def spec(self, h):
        return self.specs.get(h)

    def was_evicted(self, h) -> bool:
        return h in self.evicted

    def _note_evicted(self, h) -> None:
        self.evicted[h] = None
        while len(self.evicted) > max(16 * self.capacity, 4096):  # (hashes: small)
            self.evicted.popitem(last=False)

    def __len__(self):
        return len(self.executables)

    def clear(self):
        for h in self.executables:
            self._note_evicted(h)
        self.executables.clear()


# ---------------------------------------------------------------- persistent cache (on disk)

# 2: the digest covers the entry's key too (an entry copied under another program's key ran that
# other program, its digest intact)
_MAGIC = b"LAZYXLA-CACHE-2\n"
_FORMAT = b"LAZYXLA-CACHE-"
_persistent_path: str | None = None
_persistent_readonly = False
_MAX_ENTRY_BYTES = 1 << 30  # (a program's entry is kilobytes to tens of megabytes)
_listeners_installed = False


def _on_event(event: str, **kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        metrics.counter_inc("PersistentCacheHit")
    elif event == "/jax/compilation_cache/cache_misses":
        metrics.counter_inc("PersistentCacheMiss")


def _digest(key: str, payload: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\n" + payload).digest()


def _wrap_value(key: str, payload: bytes) -> bytes:
    return _MAGIC + _digest(key, payload) + payload


_STALE = object()  # an entry of another version of lazyxla's format


def _unwrap_value(key: str, blob: bytes):
    """The payload; None for a corrupt entry (or one stored under another key); _STALE."""
    n = len(_MAGIC)
    if len(blob) < n + 32 or blob[:n] != _MAGIC:
        return _STALE if blob[:len(_FORMAT)] == _FORMAT and blob[:n] != _MAGIC else None
    digest, payload = blob[n:n + 32], blob[n + 32:]
    return payload if _digest(key, payload) == digest else None


def _make_verified_cache(base, readonly: bool):
    from jax._src.compilation_cache import CacheInterface

    class VerifiedCache(CacheInterface):
        """Checks every entry's header and SHA-256 before JAX deserializes it."""

        def __init__(self):
            self._base = base
            self._path = getattr(base, "_path", None)

        def get(self, key):
            problem = self._unreadable(key)
            if problem is None:
                try:
                    blob = self._base.get(key)
                except Exception as e:  # noqa: BLE001 - (unreadable: permissions, a directory)
                    problem = f"cannot be read ({type(e).__name__}: {e})"
            if problem is not None:
                return self._corrupt(key, problem)
            if blob is None:
                return None
            payload = _unwrap_value(key, blob)
            if payload is _STALE:  # (written by another lazyxla version: replaced, quietly)
                self._remove(key)
                return None
            if payload is None:
                return self._corrupt(key, "failed its integrity check")
            return payload

        def _unreadable(self, key):
            """Why the entry's file is not read at all, or None: only a regular file (no link, no
            FIFO, which would block the read forever, no device such as /dev/zero, which would
            be read without end) of at most _MAX_ENTRY_BYTES is."""
            if self._path is None:
                return None
            try:
                st = os.lstat(self._path / f"{key}-cache")
            except FileNotFoundError:
                return None
            except OSError as e:
                return f"cannot be examined ({e.strerror})"
            if not stat.S_ISREG(st.st_mode):
                return "is not a regular file"
            if st.st_size > _MAX_ENTRY_BYTES:
                return f"is {st.st_size} bytes, more than any program's ({_MAX_ENTRY_BYTES})"
            return None

        def _corrupt(self, key, problem):
            metrics.counter_inc("PersistentCacheCorrupt")
            warnings.warn(f"lazyxla: persistent cache entry {key} {problem}; it is discarded "
                          "and the program recompiled")
            self._remove(key)
            return None

        def put(self, key, value):
            if not readonly:
                if self._path is not None:  # JAX's write would follow a link out of the cache
                    for p in self._path.glob(f"{key}*"):
                        if p.is_symlink():
                            self._remove(key)
                            break
                if getattr(self._base, "eviction_enabled", False) and self._path is not None:
                    with self._base.lock:  # (a FileLock: put takes it again, as its owner)
                        self._date_undated()
                        self._base.put(key, _wrap_value(key, value))
                else:
                    self._base.put(key, _wrap_value(key, value))

        def _date_undated(self):
            """With a size limit JAX evicts by each entry's access time, kept in a `-atime` file
            beside it, and its eviction fails on an entry without one (written while the cache
            had no limit, or its file removed): every later write failed. Such an entry gets the
            oldest time, so it goes first; what is not a regular file there is replaced."""
            for p in self._path.glob("*-cache"):
                atime = p.with_name(p.name[:-len("-cache")] + "-atime")
                try:
                    st = os.lstat(atime)
                    if stat.S_ISREG(st.st_mode):
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        shutil.rmtree(atime)
                    else:
                        atime.unlink()
                except FileNotFoundError:
                    pass
                except OSError:
                    continue  # (JAX's eviction will say what is wrong with it)
                try:
                    atime.write_bytes(bytes(8))
                except OSError:
                    pass

        def _remove(self, key):
            if readonly or self._path is None:
                return
            for p in self._path.glob(f"{key}*"):
                try:
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p)
                    else:
                        p.unlink()
                except OSError:
                    pass

        def clear(self):
            self._base.clear()

    return VerifiedCache()


def initialize_persistent_cache(path: str, readonly: bool = False) -> None:
    """Store compiled programs under `path` so that later processes skip XLA compiles.

    This turns on JAX's persistent compilation cache for the process (it is process-wide in JAX),
    with thresholds lowered so that lazyxla's small graphs are cached too."""
    global _persistent_path, _persistent_readonly, _listeners_installed
    import jax
    from jax._src import compilation_cache as cc

    path = os.fsdecode(os.fspath(path))
    if not path.strip():  # (abspath would make it the working directory)
        raise ValueError("lazyxla: the persistent cache path is empty")
    if "://" in path:
        raise ValueError(f"lazyxla: the persistent cache path {path!r} is a URL; lazyxla caches "
                         "in a local directory")
    path = os.path.abspath(path)
    if not readonly:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:  # a file there, a parent that cannot hold directories (/proc)
            raise type(e)(e.errno, f"lazyxla: cannot make the persistent cache directory {path!r}: "
                                   f"{e.strerror}") from e
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"lazyxla: the persistent cache directory {path!r} is not "
                                  "writable (initialize_cache(path, readonly=True) only reads it)")
    elif not os.path.isdir(path):
        if os.path.exists(path):
            raise NotADirectoryError(f"lazyxla: read-only persistent cache {path!r} is not a "
                                     "directory")
        raise FileNotFoundError(f"lazyxla: read-only persistent cache {path!r} does not exist")
    if (_persistent_path, _persistent_readonly) == (path, readonly):
        return
    if _persistent_path is not None:
        cc.reset_cache()
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    cc.reset_cache()
    base = cc.LRUCache(path, max_size=cc.config.compilation_cache_max_size.value)
    cc._cache = _make_verified_cache(base, readonly)
    cc._cache_initialized = True
    if not _listeners_installed:
        jax.monitoring.register_event_listener(_on_event)
        _listeners_installed = True
    _persistent_path, _persistent_readonly = path, readonly


def persistent_cache_path() -> str | None:
    return _persistent_path

"""bench.soak --tracemalloc and --mallinfo: loaded into the worker process (``PYTHONPATH``) to say
where its memory grows, without any code of its own in the worker.

With ``BATCHD_MALLINFO_DIR`` set, each SIGUSR1 writes ``mallinfo-<n>.txt`` there: one line of
glibc's ``mallinfo2`` (the heap's bytes in use and free, summed over every arena, and the bytes in
chunks of their own ``mmap``), pymalloc's arenas and the objects Python's collector tracks: it tells
memory the program holds from holes the allocator keeps. With ``BATCHD_CENSUS`` set too, it adds
the 200 types whose objects take most memory (the tracked objects and the untracked ones they refer
to directly: strings, numbers, datetimes), which holds the interpreter for a few seconds. With
``BATCHD_MALLOC_TRIM`` set, each sample then calls ``malloc_trim(0)`` and adds the RSS after it: how
much of the allocator's free memory is whole pages it could hand back.

With ``BATCHD_TRACEMALLOC_DIR`` set, tracing starts as the interpreter starts; each SIGUSR1 writes
``tracemalloc-<n>.txt`` there: the traced total and the 25 source lines whose allocations grew most
since the previous signal (by size, with their counts). Lines, not snapshots: a snapshot of a worker
holding thousands of workflows is itself hundreds of MB.

With ``BATCHD_GC_LOG`` set to a folder, every collection of the oldest generation, and any other
that takes 50 ms or more, appends a line to ``gc-<pid>.txt`` there: its wall-clock end, generation,
duration in ms and objects collected. A full collection holds the interpreter, so one that lands
just before a schedule time delays every creation of that time.
"""

from __future__ import annotations

import os

_DIR = os.environ.get("BATCHD_TRACEMALLOC_DIR")
_MALLINFO_DIR = os.environ.get("BATCHD_MALLINFO_DIR")

_GC_LOG = os.environ.get("BATCHD_GC_LOG")

if _GC_LOG:
    import gc as _gc
    import time as _time

    _gc_file = os.path.join(_GC_LOG, f"gc-{os.getpid()}.txt")
    _gc_began = [0.0]

    def _gc_timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _gc_began[0] = _time.perf_counter()
            return
        took = (_time.perf_counter() - _gc_began[0]) * 1000
        if info["generation"] == 2 or took >= 50:
            with open(_gc_file, "a") as out:
                out.write(f"{_time.time():.3f} {info['generation']} {took:.1f} {info['collected']}\n")

    _gc.callbacks.append(_gc_timed)

if _MALLINFO_DIR:
    import ctypes
    import gc
    import signal
    import time

    class _MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    _libc = ctypes.CDLL(None)
    _libc.mallinfo2.restype = _MallInfo2
    _mallinfo_folder: str = _MALLINFO_DIR
    _samples = [0]

    def _pymalloc_arenas() -> int:
        """pymalloc's arenas of 1 MiB now held; ``sys._debugmallocstats`` writes them to the C stderr."""
        import re
        import sys
        r, w = os.pipe()
        saved = os.dup(2)
        os.dup2(w, 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(w)
        with os.fdopen(r) as f:
            found = re.search(r"# arenas allocated current\s*=\s*([\d,]+)", f.read())
        return int(found.group(1).replace(",", "")) if found else -1

    #: the census's types, largest first: enough that two minutes' files show which ones grow
    CENSUS_TYPES = 200

    def _census() -> list[str]:
        import collections
        import sys
        seen: set[int] = set()
        count: collections.Counter[str] = collections.Counter()
        size: collections.Counter[str] = collections.Counter()
        for obj in gc.get_objects():
            for o in (obj, *(r for r in gc.get_referents(obj) if not gc.is_tracked(r))):
                if id(o) in seen:
                    continue
                seen.add(id(o))
                kind = f"{type(o).__module__}.{type(o).__qualname__}"
                count[kind] += 1
                size[kind] += sys.getsizeof(o)
        return [f"{b / 2**20:8.1f} MiB {count[k]:9d}  {k}" for k, b in size.most_common(CENSUS_TYPES)]

    def _mallinfo(_signum: int, _frame: object) -> None:
        info = _libc.mallinfo2()
        _samples[0] += 1
        lines = [f"malloc in use {info.uordblks / 2**20:.0f}, free {info.fordblks / 2**20:.0f}, "
                 f"mmap {info.hblkhd / 2**20:.0f} MiB; pymalloc {_pymalloc_arenas()} MiB; "
                 f"{len(gc.get_objects())} tracked objects"]
        if os.environ.get("BATCHD_MALLOC_TRIM"):  # then hand back the free pages, and say what that left
            began = time.monotonic()
            _libc.malloc_trim(0)
            took = time.monotonic() - began
            with open("/proc/self/status") as status:
                rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
            lines[0] += f"; malloc_trim(0) took {took * 1000:.0f} ms, RSS after {rss / 1024:.0f} MiB"
        if os.environ.get("BATCHD_CENSUS"):
            lines += _census()
        with open(os.path.join(_mallinfo_folder, f"mallinfo-{_samples[0]}.txt"), "w") as out:
            out.write("\n".join(lines) + "\n")

    def _mallinfo_safely(signum: int, frame: object) -> None:
        # The handler runs between two bytecodes of the main thread, which may be a workflow's code
        # in the SDK's sandbox: there ``open`` is refused, and an exception raised here would fail
        # that workflow's task. The sample is skipped instead ("no sample" in the bench's row).
        try:
            _mallinfo(signum, frame)
        except Exception:
            pass

    signal.signal(signal.SIGUSR1, _mallinfo_safely)

if _DIR:
    import signal
    import time
    import tracemalloc

    # BATCHD_TRACEMALLOC_LATE: the first signal starts the tracing, so the set-up runs at full speed
    _frames = int(os.environ.get("BATCHD_TRACEMALLOC_FRAMES", "1"))
    if not os.environ.get("BATCHD_TRACEMALLOC_LATE"):
        tracemalloc.start(_frames)
    _folder: str = _DIR
    _previous: dict[str, tuple[int, int]] = {}
    _taken = [0]

    def _dump(_signum: int, _frame: object) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(_frames)
            return
        began = time.monotonic()
        stats = tracemalloc.take_snapshot().statistics("lineno")
        now = {str(s.traceback): (s.size, s.count) for s in stats}
        grown = sorted(((size - _previous.get(where, (0, 0))[0], count - _previous.get(where, (0, 0))[1], where)
                        for where, (size, count) in now.items()), reverse=True)
        traced, peak = tracemalloc.get_traced_memory()
        _taken[0] += 1
        with open(os.path.join(_folder, f"tracemalloc-{_taken[0]}.txt"), "w") as out:
            out.write(f"traced {traced / 2**20:.1f} MiB (peak {peak / 2**20:.1f}); {len(now)} lines; "
                      f"took {time.monotonic() - began:.1f} s\n")
            for size, count, where in grown[:25]:
                out.write(f"{size / 2**20:+9.2f} MiB {count:+9d} blocks  {where}\n")
        _previous.clear()
        _previous.update(now)

    signal.signal(signal.SIGUSR1, _dump)

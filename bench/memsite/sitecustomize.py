"""bench.soak --tracemalloc: loaded into the worker process (``PYTHONPATH``) to say where its Python
memory grows, without any code of its own in the worker.

With ``BATCHD_TRACEMALLOC_DIR`` set, tracing starts as the interpreter starts; each SIGUSR1 writes
``tracemalloc-<n>.txt`` there: the traced total and the 25 source lines whose allocations grew most
since the previous signal (by size, with their counts). Lines, not snapshots: a snapshot of a worker
holding thousands of workflows is itself hundreds of MB.
"""

from __future__ import annotations

import os

_DIR = os.environ.get("BATCHD_TRACEMALLOC_DIR")

if _DIR:
    import signal
    import time
    import tracemalloc

    tracemalloc.start(int(os.environ.get("BATCHD_TRACEMALLOC_FRAMES", "1")))
    _folder: str = _DIR
    _previous: dict[str, tuple[int, int]] = {}
    _taken = [0]

    def _dump(_signum: int, _frame: object) -> None:
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

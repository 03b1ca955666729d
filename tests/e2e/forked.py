"""``batchd worker`` processes forked from one that has already imported batchd.

Most of a worker process's start-up is importing: 1,100 modules, seconds of CPU, and tens of
seconds on a loaded 2-core machine whose page cache is small. Tests that kill and restart the
worker a dozen times paid that each time. Here a multiprocessing fork server imports the CLI and
everything ``batchd worker`` uses once, while it has no thread yet; each worker is a fork of it
that runs the console script's own entry point (``worker.cli.main``) with the same arguments, its
output appended to a log file. What a test signals is a whole worker process of its own.

Stdlib only at import: the fork server and every child import this module.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from pathlib import Path

PRELOAD = ["worker.cli", "worker.app", "worker.bridge", "worker.temporal", "worker.telemetry", "worker.watchdog"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


def _main(args: list[str], log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    from worker.cli import main

    main(args, prog_name="batchd")  # exits through SystemExit, which sets the exit code


class Forked:
    """The parts of :class:`subprocess.Popen` the tests use, for a forked worker."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args = args
        self._process = _context.Process(target=_main, args=(args, str(log)))
        self._process.start()

    @property
    def pid(self) -> int:
        return self._process.pid or 0

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self._process.kill()

    def terminate(self) -> None:
        self._process.terminate()

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._process.exitcode


"""``python -m bench``: every bench of docs/benchmarks.md's "Other benches" table, one after the
other, as the table gives them, so that its figures come from one run of one commit.

Each bench's output goes to the terminal and to ``DIR/NAME.log``; a bench that fails is reported
and the next one runs. The whole list takes about two hours here (``bench.compare`` is apart: it
builds and runs a real control plane, see its own ``--help``).

    .venv/bin/python -m bench [--only ttl,job-20000] [--logs DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: name -> arguments after ``python``, in the table's order
BENCHES: dict[str, list[str]] = {
    "kubesim": ["bench/kubesim_bench.py"],
    "ttl": ["-m", "bench.ttl"],
    "ttl-40000": ["-m", "bench.ttl", "--jobs", "0", "--sleepers", "40000"],
    "cronjob": ["-m", "bench.cronjob"],
    "cronjob-2000": ["-m", "bench.cronjob", "--cronjobs", "2000", "--max-cached-workflows", "2500",
                     "--sticky-wait", "60s"],
    "cronjob-2000-replicas": ["-m", "bench.cronjob", "--cronjobs", "2000", "--max-cached-workflows", "2500",
                              "--sticky-wait", "60s", "--replicas", "2", "--minutes", "6"],
    "burst": ["-m", "bench.burst"],
    "job": ["-m", "bench.job"],
    "job-20000": ["-m", "bench.job", "--completions", "20000", "--parallelism", "1000"],
    "job-100000": ["-m", "bench.job", "--completions", "100000", "--parallelism", "100000", "--run-seconds", "30"],
    "soak": ["-m", "bench.soak", "--replicas", "2"],
    "soak-1000": ["-m", "bench.soak", "--replicas", "2", "--cronjobs", "1000", "--minutes", "8"],
    "group": ["-m", "bench.group"],
    "cost": ["-m", "bench.cost"],
}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Every bench of docs/benchmarks.md's "
                                     "\"Other benches\" table, one after the other.")
    parser.add_argument("--only", default="", help=f"a comma-separated subset of: {', '.join(BENCHES)}")
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "bench", help="a log per bench (default: %(default)s)")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(BENCHES)
    if unknown := [n for n in names if n not in BENCHES]:
        parser.error(f"no bench named {', '.join(unknown)}")
    args.logs.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"python -m bench: {len(names)} benches at {commit or 'an unknown commit'}, logs in {args.logs}", flush=True)
    results = []
    for name in names:
        began = time.monotonic()
        print(f"\n== {name}: python {' '.join(BENCHES[name])} ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)", flush=True)
        with (args.logs / f"{name}.log").open("w") as log:
            proc = subprocess.Popen([sys.executable, *BENCHES[name]], cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                log.write(line)
            code = proc.wait()
        results.append((name, code, (time.monotonic() - began) / 60))
    print("\npython -m bench:")
    for name, code, minutes in results:
        print(f"  {name:<24} {'ok' if code == 0 else f'exit {code}':<8} {minutes:5.1f} min")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())

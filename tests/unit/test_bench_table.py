"""docs/benchmarks.md's "Other benches" table and ``python -m bench`` name the same benches, each
with the same command: a figure in the table is one that ``python -m bench --only NAME`` prints."""

from __future__ import annotations

import re
from pathlib import Path

from bench.__main__ import BENCHES

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def table_commands() -> dict[str, str]:
    text = DOC.read_text().split("\n## Other benches\n", 1)[1]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| `([^`]+)` \|", text.split("\n\n## ", 1)[0], re.MULTILINE)
    return dict(rows)


def test_the_table_and_the_runner_list_the_same_benches_with_the_same_commands() -> None:
    assert table_commands() == {name: " ".join(["python", *args]) for name, args in BENCHES.items()}

"""Rule ids cited anywhere in the repository, tests included, are ids the docs define.

The behaviour docs define stable ids (``**CJ-12 — …**``, ``**API-1** — …``); code, tests, comments
and docs cite them (``# CJ-12``, ``TTL-HOLD``, ``POL-3 to POL-7``). A citation of an id no doc
defines, of an old spec code (a section letter from A to L followed by a number) or of a spec
file outside the repository fails here.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What is scanned: every text file under these directories, and these files.
SOURCE_DIRS = ("workflows", "activities", "worker", "kubesim", "cronexpr", "bench", "deploy", ".ci", "tests")
SOURCE_FILES = ("Dockerfile", "Makefile", "pyproject.toml", "README.md")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".cfg", ".ini", ".json", ""}

#: A definition in docs/*.md: ``**TTL-6 — …``, ``**API-1** — …``, ``**CJ-SUBMINUTE — …``.
DEFINITION = re.compile(r"\*\*([A-Z]+(?:-[A-Z0-9]+)+)(?:\*\*)? —")
#: An old spec code: a letter from A to L and one or two digits; in a range each end matches.
OLD_CODE = re.compile(r"\b[A-L][0-9]{1,2}\b")
#: A reference to the old spec files, which are not in the repository.
OUTSIDE_SPEC = re.compile(r"shared/spec|\bspec/[\w-]+\.md|cronjob-and-ttl\.md|\bjob-policies\b|notes/[\w-]+\.md")


def doc_files() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md"))


def source_files() -> list[Path]:
    files = [ROOT / f for f in SOURCE_FILES if (ROOT / f).is_file()]
    for d in SOURCE_DIRS:
        files += [p for p in (ROOT / d).rglob("*")
                  if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts]
    return sorted(files) + doc_files()


def defined_ids() -> dict[str, list[str]]:
    """Each id the docs define, with the docs that define it."""
    found: dict[str, list[str]] = {}
    for doc in doc_files():
        for rule_id in DEFINITION.findall(doc.read_text()):
            found.setdefault(rule_id, []).append(doc.name)
    return found


def id_citation(prefixes: set[str]) -> re.Pattern[str]:
    """Ids of the families the docs use: ``CJ-12``, ``CJ-CATCH-UP``, ``TIME-1`` (not ``TTL-after``)."""
    alternatives = "|".join(sorted(prefixes, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternatives})-[A-Z0-9]+(?:-[A-Z0-9]+)*\b(?!-[a-z])")


def prose(path: Path) -> list[tuple[int, str]]:
    """The lines where citations live: comments and docstrings of Python, all of any other text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), 1))
    out: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and tok.string.lstrip("rbufRBUF").startswith(('"""', "'''"))):
            out += [(tok.start[0] + i, line) for i, line in enumerate(tok.string.splitlines())]
    return out


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_docs_define_ids_once() -> None:
    ids = defined_ids()
    assert len(ids) > 200, "the definition pattern no longer matches the docs"
    assert {"TTL-1", "TTL-HOLD", "CJ-12", "CJ-SUBMINUTE", "JOB-38", "POL-3", "API-51", "TIME-1"} <= ids.keys()
    assert {i: d for i, d in ids.items() if len(d) > 1} == {}


def test_every_cited_id_is_defined() -> None:
    ids = defined_ids()
    cited = id_citation({i.split("-")[0] for i in ids})
    undefined = [f"{rel(p)}:{n}: {m}" for p in source_files() for n, line in enumerate(p.read_text().splitlines(), 1)
                 for m in cited.findall(line) if m not in ids]
    assert undefined == []


def test_no_old_spec_code_or_outside_spec_is_cited() -> None:
    old = [f"{rel(p)}:{n}: {line.strip()}" for p in source_files() for n, line in prose(p)
           if OLD_CODE.search(line) or OUTSIDE_SPEC.search(line)]
    assert old == []

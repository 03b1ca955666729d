"""Tier 4: the docs' shell blocks, run against ``batchd dev`` as a reader would type them.

Every fenced ``sh``/``console`` block in README.md and docs/ is marked in its info string:
``runnable``, or ``not-runnable`` when it cannot run here (a real cluster, a build, a command
that runs until Ctrl-C). The runnable ones run in one dev world (``batchd dev``, examples applied),
the documents in :data:`DOCS`' order and each document's blocks in order, with ``KUBECONFIG`` and
``TEMPORAL_ADDRESS`` set to that world's and ``.venv/bin`` on ``PATH``:

- a ``sh`` block runs line by line (a line ending in ``\\`` goes on, ``export NAME=VALUE`` sets
  the environment of the lines after it);
- in a ``console`` block, ``$ COMMAND`` runs (a here-document goes with it), and the lines below
  it up to the next ``$`` are what it shows: each must match a line of its output (stdout and
  stderr), in order; ``…`` stands for any text, a run of blanks for any blanks, and a line that
  starts with ``#`` is a comment.

A command is run again until it exits 0 and shows what the block says, for up to
:data:`PATIENCE` seconds: the world is eventually consistent (a workflow starts a moment after
its object). So a command or flag renamed in the code, and not in the docs, fails ``make test``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from worker.cluster import halt
from worker.dev import free_port

ROOT = Path(__file__).resolve().parents[2]
#: the order the blocks run in: a later document may use what an earlier one made (team-a/nightly)
DOCS = [ROOT / "README.md", *(ROOT / "docs" / f"{name}.md" for name in (
    "cli", "cronjob", "job", "ttl", "operations", "kubesim", "design", "benchmarks"))]
SHELLS = {"sh", "console", "bash", "shell"}
MARKS = ("runnable", "not-runnable")
#: how long a command may take to show what its block says, tries included
PATIENCE = 90.0
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    mark: str | None
    text: str

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Step:
    command: str
    shows: tuple[str, ...]  # the lines it shows; empty: only that it succeeds


def blocks(doc: Path) -> Iterator[Block]:
    """The fenced blocks of a shell language in ``doc`` (the fence may be indented, as in a list)."""
    lines = doc.read_text().splitlines()
    start: tuple[int, str, str | None] | None = None
    body: list[str] = []
    for n, line in enumerate(lines, 1):
        fence = line.strip()
        if start is None and fence.startswith("```"):
            words = fence[3:].split()
            lang = words[0] if words else ""
            mark = next((w.rstrip(":") for w in words[1:] if w.rstrip(":") in MARKS), None)
            start, body = (n, lang, mark), []
        elif start is not None and fence == "```":
            if start[1] in SHELLS:
                yield Block(doc, start[0], start[1], start[2], _dedent(body))
            start = None
        elif start is not None:
            body.append(line)


def _dedent(lines: list[str]) -> str:
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def steps(block: Block) -> list[Step]:
    """What a block runs, and what each command shows."""
    lines = block.text.splitlines()
    out: list[Step] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if block.lang == "console" and not line.startswith("$ "):
            if out and line.strip() and not line.strip().startswith("#"):
                out[-1] = Step(out[-1].command, (*out[-1].shows, line.strip()))
            continue
        command = line[2:] if block.lang == "console" else line
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        while command.rstrip().endswith("\\") and i < len(lines):
            command = command.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        if heredoc := re.search(r"<<-?\s*'?(\w+)'?", command):
            while i < len(lines):
                command += "\n" + lines[i]
                i += 1
                if lines[i - 1].strip() == heredoc[1]:
                    break
        out.append(Step(command, ()))
    return out


def shown(shows: tuple[str, ...], output: str) -> str | None:
    """None if ``output`` shows each line of ``shows`` in order; else the first line it does not."""
    actual = iter(output.splitlines())
    for want in shows:
        if want == "…":
            continue
        pattern = re.compile(r"\s+".join(re.escape(part).replace("…", ".*?") for part in want.split()))
        if not any(pattern.search(line) for line in actual):
            return want
    return None


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc)]


def test_every_shell_block_of_the_docs_is_marked_runnable_or_not() -> None:
    found = all_blocks()
    unmarked = [b.where() for b in found if b.mark is None]
    assert not unmarked, f"mark each shell block 'runnable' or 'not-runnable' after its language: {unmarked}"
    assert {b.doc.name for b in found if b.mark == "runnable"} >= {"README.md", "cli.md", "cronjob.md", "job.md"}
    assert all(steps(b) for b in found if b.mark == "runnable")


def test_the_step_reader_and_matcher() -> None:
    block = Block(ROOT / "x.md", 1, "console", "runnable", "\n".join([
        "$ kubectl get jobs \\", "    -n team-a", "NAME   STATUS", "# a comment", "etl-1  Complete   …",
        "$ kubectl apply -f - <<'EOF'", "kind: Job", "EOF", "job.batch/x created"]))
    first, second = steps(block)
    assert first == Step("kubectl get jobs  -n team-a", ("NAME   STATUS", "etl-1  Complete   …"))
    assert second == Step("kubectl apply -f - <<'EOF'\nkind: Job\nEOF", ("job.batch/x created",))
    assert shown(first.shows, "NAME     STATUS\netl-1    Complete   1/1   5s\n") is None
    assert shown(first.shows, "etl-1  Complete\nNAME STATUS\n") == "etl-1  Complete   …"  # the order counts
    assert shown(("a", "…", "b"), "a\nb") is None


@dataclass
class World:
    cwd: Path
    env: dict[str, str]
    log: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """``batchd dev`` on free ports, in a directory of its own that has the repository's deploy/."""
    cwd = tmp_path_factory.mktemp("docs")
    (cwd / "deploy").symlink_to(ROOT / "deploy")
    log = cwd / "dev.log"
    dev: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(3):  # a port picked free may be taken before the world binds it
            port = free_port()
            args = [str(BIN / "batchd"), "dev", "--state-dir", ".batchd", "--temporal-port", str(port),
                    "--ui-port", str(free_port()), "--health-port", str(free_port())]
            with open(log, "ab") as out:  # a session of its own: halt() stops its dev server with it
                dev = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + 240
            while dev.poll() is None and "batchd dev is running" not in log.read_text():
                assert time.monotonic() < deadline, f"batchd dev did not start:\n{log.read_text()[-3000:]}"
                time.sleep(0.2)
            if dev.poll() is None:
                break
        else:
            raise AssertionError(f"batchd dev exited at start three times:\n{log.read_text()[-3000:]}")
        env = {**os.environ, "KUBECONFIG": str(cwd / ".batchd" / "kubeconfig"),
               "TEMPORAL_ADDRESS": f"127.0.0.1:{port}", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("BATCHD_UPSTREAM_CACHE", None)
        yield World(cwd, env, log)
    finally:
        halt(dev, timeout=30)


def run(world: World, block: Block, step: Step) -> None:
    """Run ``step`` until it succeeds and shows what it should, or fail saying where and how."""
    if m := re.fullmatch(r"export (\w+)=(\S+)", step.command.split("#")[0].strip()):
        world.env[m[1]] = str(world.cwd / m[2]) if m[2].startswith(".") else m[2]
        return
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            res = subprocess.run(["bash", "-o", "pipefail", "-c", step.command], cwd=world.cwd, env=world.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=PATIENCE)
            output, code = res.stdout, res.returncode
        except subprocess.TimeoutExpired:
            output, code = "(timed out)", -1
        missing = shown(step.shows, output) if code == 0 else None
        if code == 0 and missing is None:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    why = f"exit code {code}" if code != 0 else f"no line shows {missing!r}"
    pytest.fail(f"{block.where()}: `{step.command}`: {why}\n--- output:\n{output[-3000:]}\n"
                f"--- batchd dev's log:\n{world.log.read_text()[-2000:]}", pytrace=False)


@pytest.mark.timeout(900)
def test_the_docs_runnable_blocks_run_against_batchd_dev_and_show_what_they_say(world: World) -> None:
    found = all_blocks()
    runnable = [b for b in found if b.mark == "runnable"]
    commands = 0
    for block in runnable:
        for step in steps(block):
            run(world, block, step)
            commands += 1
    print(f"docs: {len(runnable)} runnable blocks ({commands} commands) ran against batchd dev; "
          f"{len(found) - len(runnable)} marked not runnable")

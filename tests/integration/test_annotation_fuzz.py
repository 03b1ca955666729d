"""FAIL-CLOSED under fuzz (tests/annotation_fuzz.py): every batchd.io/* annotation, valid and
invalid, set and changed while the objects run; the invariants hold on both backends. The seed is
fixed (``BATCHD_FUZZ_SEED`` picks another; ``python -m bench.fuzz --annotations`` runs longer)."""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest

from tests.annotation_fuzz import AnnotationFuzz
from tests.conftest import running


@pytest.mark.timeout(300)
async def test_annotations_fuzzed_while_objects_run_keep_every_invariant(client, kube, namespace, task_queue) -> None:
    seed = int(os.environ.get("BATCHD_FUZZ_SEED", "53"))
    fuzz = AnnotationFuzz(kube, namespace, random.Random(seed))
    async with running(client, kube, task_queue, namespace):
        fuzz.start(cases=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline or fuzz.pending:
            fuzz.step()
            await asyncio.sleep(0.25)
        for _ in range(12):  # the last changes' effects, and the TTL deletions they allow
            fuzz.step()
            await asyncio.sleep(0.5)
        broken = await fuzz.check(client)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(fuzz.counts.items()))
    print(f"annotation fuzz (seed {seed}): {len(fuzz.cases)} cases; {counts}")
    assert not broken, "\n".join(broken)

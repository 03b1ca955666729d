"""FAIL-CLOSED: the worker's readers of batchd.io/* annotations against tests/annotation_cases.py,
the table the admission policy is held to on kube-apiserver (tests/e2e/test_admission_policy.py);
and which annotation holds its object, and which is only ignored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.annotation_cases import CASES, Case, refusals
from workflows.models.common import ObjectMeta
from workflows.models.cronjob import CRONJOB_ANNOTATIONS, CronJob, CronJobObservation
from workflows.models.job import JOB_ANNOTATIONS, JobOptions

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("case", CASES, ids=Case.id)
def test_the_readers_accept_and_refuse_the_tables_values(case: Case) -> None:
    found = refusals(case)
    assert not found if case.valid else found, found


@pytest.mark.parametrize(("kind", "table", "doc"), [("CronJob", CRONJOB_ANNOTATIONS, "cronjob.md"),
                                                    ("Job", JOB_ANNOTATIONS, "job.md")])
def test_the_docs_table_says_what_each_annotation_does_when_unreadable(kind: str, table: dict[str, str], doc: str) -> None:
    rows = dict(re.findall(r"^ *\| `(batchd\.io/[a-z-]+)` \| (holds|is ignored) \|", (DOCS / doc).read_text(), re.MULTILINE))
    assert {name: "hold" if effect == "holds" else "ignore" for name, effect in rows.items()} == table


def test_a_held_cronjob_names_the_value_what_is_wrong_and_that_it_is_held() -> None:
    obs = CronJobObservation.of(CronJob(metadata=ObjectMeta(name="c", annotations={
        "batchd.io/max-runs": "-1", "batchd.io/jitter-percent": "99"})))
    assert obs.held == ("annotation batchd.io/max-runs='-1' must be an integer from 1 to 2147483647; the CronJob is "
                        "held: no Job is created from its schedule until it is fixed or removed")
    assert obs.problem == "annotation batchd.io/jitter-percent='99' must be an integer from 0 to 50; ignored"
    assert obs.max_runs is None and obs.jitter_percent == 0


def test_a_held_job_says_both_of_its_annotations_and_what_holding_it_means() -> None:
    opts = JobOptions.of({"batchd.io/after": ",".join(f"j{i}" for i in range(101)),
                          "batchd.io/ttl-seconds-after-failure": "soon", "batchd.io/delete-succeeded-pods": "yes"})
    assert opts.held is not None and opts.held.startswith("annotation batchd.io/after='j0,j1,")
    assert "must be at most 100 names separated by commas; annotation batchd.io/ttl-seconds-after-failure='soon' " \
           "must be an integer from 0 to 9223372036854775807; the Job is held: it creates no Pod and is not deleted " \
           "until they are fixed or removed" in opts.held
    assert opts.problem == "annotation batchd.io/delete-succeeded-pods='yes' must be 'false' or 'true'; ignored"
    assert opts.after == [] and not opts.delete_succeeded_pods


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted({**CRONJOB_ANNOTATIONS, **JOB_ANNOTATIONS})),
       value=st.one_of(st.text(max_size=40), st.text(alphabet="0123456789 ,;*/-?\t\nTZ@abcjanmon:.+Z", max_size=40),
                       st.integers(-10, 10**20).map(str), st.sampled_from(["" "x" * 5000, "0" * 5000])))
def test_no_value_breaks_a_reader(name: str, value: str) -> None:
    # every value is read or refused, never an exception (int() of 5,000 digits raises, say)
    kind = "Job" if name in JOB_ANNOTATIONS else "CronJob"
    refusals(Case(kind, {name: value}, valid=True))

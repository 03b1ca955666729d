"""NOTIFY-EVENTS: the CloudEvent a workflow sends, and the activity that POSTs it (against a local sink)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from temporalio.exceptions import ApplicationError

from activities.events import CloudEventActivities
from tests.sink import sink_server
from workflows.models.common import JOB_COMPLETE_EVENT, CloudEvent, ObjectRef

AT = datetime(2026, 11, 27, 3, 0, 5, tzinfo=UTC)
EVENT = CloudEvent.about(ObjectRef(kind="Job", namespace="team-a", name="etl", uid="u1"), JOB_COMPLETE_EVENT,
                         "complete", AT, {"outcome": "Complete"})


def test_the_event_is_structured_cloudevents_json_with_a_stable_id() -> None:
    body = EVENT.body()
    assert body == {
        "specversion": "1.0", "id": "u1/complete", "type": "io.batchd.job.complete",
        "source": "/apis/batch/v1/namespaces/team-a/jobs/etl", "subject": "etl", "time": "2026-11-27T03:00:05Z",
        "datacontenttype": "application/json",
        "data": {"namespace": "team-a", "name": "etl", "uid": "u1", "outcome": "Complete"}}


def test_delivery_posts_once_and_says_what_to_retry() -> None:
    with sink_server() as sink:
        deliver = CloudEventActivities(sink.url).deliver
        deliver(EVENT)
        assert sink.received == [EVENT.body()] and sink.headers[0].startswith("application/cloudevents+json")
        for status, retried in ((503, True), (429, True), (408, True), (400, False), (413, False)):
            sink.status = status
            with pytest.raises(ApplicationError) as err:
                deliver(EVENT)
            assert err.value.non_retryable is not retried, status
        assert sink.refused == 5


def test_an_unreachable_sink_is_retried_and_no_sink_sends_nothing() -> None:
    with sink_server() as sink:
        url = sink.url
    with pytest.raises(ApplicationError) as err:
        CloudEventActivities(url, timeout=2).deliver(EVENT)
    assert not err.value.non_retryable and "unreachable" in str(err.value)
    CloudEventActivities(None).deliver(EVENT)  # off: nothing to do

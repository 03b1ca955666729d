"""NOTIFY-EVENTS: CloudEvents end to end — the worker's sink gets each Job's end, each CronJob run missed
or skipped and each breaker suspension, at least once, also when it was down for a while."""

from __future__ import annotations

from datetime import timedelta

from tests.conftest import eventually, running, utcnow
from tests.integration.test_cronjob import cronjob_manifest, jobs_of, started
from tests.integration.test_job import job_manifest, outcome
from tests.k8s import finish_job, second
from tests.sink import sink_server


async def test_each_job_that_finishes_is_told_once_even_to_a_sink_that_was_down(client, kube, namespace, task_queue):
    with sink_server() as sink:
        sink.status = 503  # down until it has refused one
        async with running(client, kube, task_queue, namespace, cloudevents_sink=sink.url):
            ok = kube.create("Job", namespace, job_manifest("ok", completions=2, parallelism=2))
            bad = kube.create("Job", namespace, job_manifest("bad", exit_code=1, backoff_limit=0, run_seconds=0.1))
            await eventually(lambda: sink.refused >= 1, what="a refusal")
            sink.status = 202
            assert await outcome(client, namespace, ok) == "Complete"
            assert await outcome(client, namespace, bad) == "Failed"
        [done] = sink.by_type("io.batchd.job.complete")
        [failed] = sink.by_type("io.batchd.job.failed")
    assert done["id"] == f"{ok['metadata']['uid']}/complete" and done["specversion"] == "1.0"
    assert done["source"] == f"/apis/batch/v1/namespaces/{namespace}/jobs/ok" and done["subject"] == "ok"
    assert (done["data"]["outcome"], done["data"]["succeeded"], done["data"]["reason"]) == (
        "Complete", 2, "CompletionsReached")
    assert failed["id"] == f"{bad['metadata']['uid']}/failed"
    assert (failed["data"]["outcome"], failed["data"]["reason"]) == ("Failed", "BackoffLimitExceeded")


async def test_a_skipped_run_and_a_breaker_suspension_are_told(client, kube, namespace, task_queue, skipper):
    midnight = (utcnow() + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    with sink_server() as sink:
        async with running(client, kube, task_queue, namespace, cronjob_lead=0, cloudevents_sink=sink.url):
            kube.create("CronJob", namespace, cronjob_manifest("brk", "0 0 * * *", annotations={
                "batchd.io/suspend-after-failures": "1", "batchd.io/skip": f"0 0 {midnight.day} {midnight.month} *"}))
            handle = await started(client, namespace, "brk")
            await skipper.fast_forward(handle, timedelta(days=2))  # the first midnight skipped, the second runs
            [job] = await eventually(lambda: jobs_of(kube, namespace, "brk"), what="the second midnight's Job")
            finish_job(kube, namespace, job["metadata"]["name"], second(utcnow()), failed=True)
            [suspended] = await eventually(lambda: sink.by_type("io.batchd.cronjob.suspended"), what="suspended")
            [missed] = sink.by_type("io.batchd.cronjob.missed")
    uid = kube.get("CronJob", namespace, "brk")["metadata"]["uid"]
    stamp = midnight.isoformat().replace("+00:00", "Z")
    assert missed["id"] == f"{uid}/{stamp}/skipped-calendar"
    assert (missed["data"]["outcome"], missed["data"]["scheduledTime"]) == ("skipped-calendar", stamp)
    assert missed["source"] == f"/apis/batch/v1/namespaces/{namespace}/cronjobs/brk"
    assert suspended["data"]["reason"] == "1 consecutive failures" and suspended["id"].startswith(f"{uid}/suspended/")

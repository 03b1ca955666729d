"""Traces: a watch event is the root of a trace that reaches the workflow, its activity and the
Kubernetes request the activity makes (SDK OpenTelemetry interceptor + batchd's own spans)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor

from tests.conftest import eventually, running, utcnow
from tests.k8s import create_job, finish_job, second
from worker.temporal import DATA_CONVERTER

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)  # once per process; the other tests never set one
    return EXPORTER


async def test_a_watch_event_traces_through_workflow_activity_and_kubernetes_request(
        spans: InMemorySpanExporter, temporal_env: Any, kube: Any, namespace: str, task_queue: str) -> None:
    client = await Client.connect(temporal_env.client.service_client.config.target_host,
                                  data_converter=DATA_CONVERTER, interceptors=[TracingInterceptor()])
    async with running(client, kube, task_queue, namespace):
        create_job(kube, namespace, "traced", ttl=0)
        finish_job(kube, namespace, "traced", second(utcnow()))
        await eventually(lambda: kube.get("Job", namespace, "traced") is None, what="TTL deletion")
        delete = await eventually(lambda: [s for s in spans.get_finished_spans()
                                           if s.name == "k8s DELETE" and "/traced" in str(s.attributes.get("url.path"))])
    by_id = {s.context.span_id: s for s in spans.get_finished_spans()}
    chain, span = [], delete[0]
    while span is not None:
        chain.append(span.name)
        span = by_id.get(span.parent.span_id) if span.parent else None
    assert chain[0] == "k8s DELETE"
    assert any(n.startswith("RunActivity:delete_expired") for n in chain), chain
    assert any(n.startswith("RunWorkflow:TTLAfterFinished") or n.startswith("StartWorkflow:TTLAfterFinished")
               or n.startswith("SignalWithStartWorkflow:TTLAfterFinished") for n in chain), chain
    assert chain[-1].startswith("bridge ") and "Job" in chain[-1], chain

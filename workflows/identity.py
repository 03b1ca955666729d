"""batchd's public identities: task queue, workflow IDs and search attributes (docs/operations.md#identities).

Layer: workflows (pure). Callers: the bridge (starts and signals workflows by these IDs), the
workflows (upsert the attributes), the CLI (lists and describes by them), the harness
(registers the attributes on a server).
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

TASK_QUEUE = "batchd"


def timed_task_queue(task_queue: str) -> str:
    """The companion queue of Job creations armed ahead of their schedule time (``{queue}-timed``).

    Its activities mostly wait, so they get their own worker and slots: thousands can wait at
    once without taking a slot or a thread from the Kubernetes activities of the main queue.
    """
    return f"{task_queue}-timed"


def ttl_task_queue(task_queue: str) -> str:
    """The queue of the TTL-after-finished workflows (``{queue}-ttl``), from 2026-11-27 on.

    A TTL workflow mostly sleeps until its expiry, hours or days away: kept in the main worker's
    cache it takes the room of a CronJob that wakes each minute. Its own worker keeps a small
    cache, and a sleeper is replayed (a few events) when it wakes. Those started before run on
    the main queue until they end.
    """
    return f"{task_queue}-ttl"


K8S_KIND = SearchAttributeKey.for_keyword("K8sKind")
K8S_NAMESPACE = SearchAttributeKey.for_keyword("K8sNamespace")
K8S_NAME = SearchAttributeKey.for_keyword("K8sName")
K8S_UID = SearchAttributeKey.for_keyword("K8sUID")
EXPIRES_AT = SearchAttributeKey.for_datetime("ExpiresAt")
NEXT_SCHEDULE_TIME = SearchAttributeKey.for_datetime("NextScheduleTime")

#: Every custom search attribute batchd writes; a server must have them registered.
SEARCH_ATTRIBUTES = (K8S_KIND, K8S_NAMESPACE, K8S_NAME, K8S_UID, EXPIRES_AT, NEXT_SCHEDULE_TIME)

#: Memo of a TTL workflow: the decision key (WATCH-3) of the observation it last took in. A
#: replica's bridge reads it once at start and sends no observation the workflow already has (a
#: memo needs no registration on the server, unlike a search attribute).
OBSERVED_KEY_MEMO = "observedKey"
#: The same memo of TTL workflows started before the decision key: the object's resourceVersion.
OBSERVED_MEMO = "observedResourceVersion"
#: Memo of a TTL workflow whose object is held (``batchd.io/ttl-hold``): the hold's reason, for
#: ``batchd ttl list``; absent when not held.
TTL_HOLD_MEMO = "ttlHold"


def ttl_workflow_id(kind: str, namespace: str, name: str, uid: str) -> str:
    """``job-ttl/{ns}/{name}/{uid}`` or ``pod-ttl/{ns}/{name}/{uid}``."""
    return f"{kind.lower()}-ttl/{namespace}/{name}/{uid}"


def cronjob_workflow_id(namespace: str, name: str) -> str:
    """``cronjob/{ns}/{name}``: one workflow per CronJob name, across recreations."""
    return f"cronjob/{namespace}/{name}"


def group_workflow_id(namespace: str, group: str) -> str:
    """``cronjob-group/{ns}/{group}``: one workflow per concurrency group of CronJobs (CJ-GROUP)."""
    return f"cronjob-group/{namespace}/{group}"


def job_workflow_id(namespace: str, name: str, uid: str) -> str:
    """``job/{ns}/{name}/{uid}``: the Job controller workflow of one Job instance."""
    return f"job/{namespace}/{name}/{uid}"

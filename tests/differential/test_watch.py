"""Watch and list at a resourceVersion: the order of events, initial events, bookmarks, 410 Gone,
resourceVersionMatch, and reads at a resourceVersion the server has not reached."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import COMPACTION_SECONDS
from tests.differential.harness import MERGE, Call, Case, Fact, Poll, Ref, Reply, Watch
from tests.differential.objects import EVENTS, LEASES, NAMESPACES, code, lease, params

OTHER_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}-x/leases"
START = Call("GET", LEASES, label="start", show=code)  # the resourceVersion before the case's writes
# a list's continue token (the base64 of its version, resourceVersion and next key) made at revision 1
CONTINUE_AT_1 = base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":1,"start":"a\\u0000"}').decode().rstrip("=")
FROM_START = Ref("start", "metadata", "resourceVersion")
# A list not older than the last write: kube-apiserver answers it from its watch cache once the cache
# has seen that write. A watch from "any" resourceVersion (0, or none) starts from the cache as it
# is, which under load may not have it yet; after this step it has.
CAUGHT_UP = Call("GET", LEASES, query={"resourceVersion": Ref("last", "metadata", "resourceVersion"),
                                       "resourceVersionMatch": "NotOlderThan"}, show=code)


def events(evs: list[dict[str, Any]]) -> list[Any]:
    """Each event's type and object, and whether resourceVersions only grew."""
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs
           if e.get("type") not in ("ERROR", "(response)")]
    return [*evs, {"resourceVersions ascend": rvs == sorted(rvs) and len(set(rvs)) == len(rvs)}]


def bookmarks(evs: list[dict[str, Any]]) -> Any:
    """What a watch of a quiet collection sent up to its first bookmark: each distinct event
    (kubesim's bookmarks come every second, kube-apiserver's two seconds before the watch times
    out, so only their being there and their shape compare), and whether every resourceVersion is
    at least as new as the one before it."""
    seen: list[Any] = []
    newest, ordered = 0, True
    for e in evs:
        rv = int(e["object"]["metadata"]["resourceVersion"])
        ordered = ordered and rv >= newest
        newest = max(newest, rv)
        shape = {**e, "object": {**e["object"], "metadata": {**e["object"]["metadata"], "resourceVersion": "<rv>"}}}
        if shape not in seen:
            seen.append(shape)
    return {"distinct": seen, "bookmarks never go back": ordered}


def items(reply: Reply) -> Any:
    if reply.status != 200:
        return reply.body
    return {"items": [(i["metadata"]["name"], i["spec"].get("holderIdentity")) for i in reply.body["items"]],
            "continued": "continue" in reply.body["metadata"]}


CASES = [
    Case("watch: the order of events from a resourceVersion", (
        START,
        Call("POST", LEASES, lease("b", holderIdentity="1"), show=code),
        Call("POST", LEASES, lease("a", holderIdentity="1"), show=code),
        Call("PATCH", LEASES + "/b", {"spec": {"holderIdentity": "2"}}, ctype=MERGE, show=code),
        Call("DELETE", LEASES + "/a", show=code),
        Call("PATCH", LEASES + "/b", {"metadata": {"labels": {"x": "1"}}}, ctype=MERGE, show=code),
        Watch(LEASES, {"resourceVersion": FROM_START}, until=lambda e: len(e) >= 5, show=events),
    )),
    Case("watch: a selector sees objects enter and leave", (
        START,
        Call("POST", LEASES, lease("a", meta={"labels": {"app": "x"}}), show=code),
        Call("PATCH", LEASES + "/a", {"metadata": {"labels": {"app": "y"}}}, ctype=MERGE, show=code),
        Call("PATCH", LEASES + "/a", {"metadata": {"labels": {"app": "x"}}}, ctype=MERGE, show=code),
        Call("DELETE", LEASES + "/a", show=code),
        Watch(LEASES, {"resourceVersion": FROM_START, "labelSelector": "app=x"}, until=lambda e: len(e) >= 4,
              show=events),
    )),
    Case("watch: initial events in key order", (
        Call("POST", LEASES, lease("b"), show=code),
        Call("POST", LEASES, lease("a"), label="last", show=code),
        CAUGHT_UP,
        Watch(LEASES, {"resourceVersion": "0"}, until=lambda e: len(e) >= 2),
        Watch(LEASES, {}, until=lambda e: len(e) >= 2),
    )),
    Case("watch: bookmarks", (
        Call("POST", NAMESPACES, {"metadata": {"name": "{ns}-x"}}, show=code),
        Call("POST", LEASES, lease("a"), label="a", show=code),
        # kube-apiserver sends a bookmark two seconds before the watch times out, if the cache has
        # moved on since the watch began: a write elsewhere in the kind moves it
        Watch(LEASES, {"resourceVersion": Ref("a", "metadata", "resourceVersion"), "allowWatchBookmarks": "true",
                       "timeoutSeconds": "8"}, until=lambda e: any(x["type"] == "BOOKMARK" for x in e),
              timeout=12, show=bookmarks, during=(Call("POST", OTHER_LEASES, lease("elsewhere")),)),
    ), extra_namespaces=("x",), seconds=6),
    Case("watch: initial events end with a bookmark", (
        Call("POST", LEASES, lease("b"), show=code),
        Call("POST", LEASES, lease("a"), label="last", show=code),
        CAUGHT_UP,
        Watch(LEASES, {"resourceVersion": "0", "allowWatchBookmarks": "true"}, until=lambda e: len(e) >= 3),
        Watch(LEASES, {"allowWatchBookmarks": "true"}, until=lambda e: len(e) >= 3),
    )),
    Case("watch: no bookmark unless asked for", (
        Call("POST", LEASES, lease("a"), label="a", show=code),
        Watch(LEASES, {"resourceVersion": Ref("a", "metadata", "resourceVersion"), "timeoutSeconds": "2"},
              until=lambda e: False),
    ), seconds=2),
    Case("watch: initial events and the bookmark that ends them", (
        Call("POST", LEASES, lease("b"), show=code),
        Call("POST", LEASES, lease("a"), label="last", show=code),
        CAUGHT_UP,
        Watch(LEASES, {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
                       "allowWatchBookmarks": "true"}, until=lambda e: len(e) >= 3),
        Watch(LEASES, {"sendInitialEvents": "true"}, until=lambda e: len(e) >= 1),
        Watch(LEASES, {"resourceVersionMatch": "NotOlderThan", "resourceVersion": "0"}, until=lambda e: len(e) >= 1),
    )),
    # kube-apiserver keeps no watch cache for Events: a watch of them is served by etcd, which
    # compacts each --etcd-compaction-interval (the tests' servers: tests.conftest.COMPACTION_SECONDS)
    # to the revision of the interval before; kubesim does the same
    Case("watch: from a compacted resourceVersion, 410 Gone", (
        Poll(EVENTS + "?resourceVersion=1&resourceVersionMatch=Exact", until=lambda r: r.status == 410,
             timeout=2 * COMPACTION_SECONDS + 20),
        Watch(EVENTS, {"resourceVersion": "1"}, until=lambda e: len(e) >= 1),
        Watch(EVENTS, {"resourceVersion": "1", "allowWatchBookmarks": "true"}, until=lambda e: len(e) >= 1),
        Call("GET", EVENTS, query={"resourceVersion": "1", "resourceVersionMatch": "NotOlderThan"}),
        Call("GET", EVENTS, query={"limit": "1", "continue": CONTINUE_AT_1}, label="expired"),
        # the 410 hands out a token that goes on at the latest resourceVersion
        Call("GET", EVENTS, query={"limit": "1", "continue": Ref("expired", "metadata", "continue")}, show=items),
    ), seconds=2 * COMPACTION_SECONDS),
    Case("watch: a resourceVersion that is not one", (
        Watch(LEASES, {"resourceVersion": "x"}, until=lambda e: len(e) >= 1),
        Watch(LEASES, {"labelSelector": "a=("}, until=lambda e: len(e) >= 1),
    )),
    Case("list: resourceVersionMatch", (
        Call("POST", LEASES, lease("b", holderIdentity="1"), label="b", show=code),
        Call("POST", LEASES, lease("a", holderIdentity="1"), show=code),
        Call("PATCH", LEASES + "/b", {"spec": {"holderIdentity": "2"}}, ctype=MERGE, show=code),
        Call("GET", LEASES, query={"resourceVersion": Ref("b", "metadata", "resourceVersion"),
                                   "resourceVersionMatch": "Exact"}, label="exact", show=items),
        Call("GET", LEASES, query={"resourceVersion": Ref("b", "metadata", "resourceVersion"),
                                   "resourceVersionMatch": "NotOlderThan"}, show=items),
        Call("GET", LEASES, query={"resourceVersion": Ref("b", "metadata", "resourceVersion")}, show=items),
        Call("GET", LEASES, query={"resourceVersion": Ref("b", "metadata", "resourceVersion"), "limit": "5"},
             show=items),
        Call("GET", LEASES, query={"resourceVersion": "0"}, show=items),
        Call("GET", LEASES + "/a", query={"resourceVersion": Ref("b", "metadata", "resourceVersion")}, show=code),
    )),
    Case("list: an exact list is at the resourceVersion asked for", (
        Call("POST", LEASES, lease("b"), label="b", show=code),
        Call("POST", LEASES, lease("a"), label="a", show=code),
        Call("GET", LEASES, query={"resourceVersion": Ref("b", "metadata", "resourceVersion"),
                                   "resourceVersionMatch": "Exact"}, label="exact"),
        # not older than the newest write, so it holds both: one not older than b's may be served
        # from a watch cache that has not yet taken in a (kube-apiserver did so once under load)
        Call("GET", LEASES, query={"resourceVersionMatch": "NotOlderThan",
                                   "resourceVersion": Ref("a", "metadata", "resourceVersion")}, label="newer"),
        Fact("the exact list's", lambda ctx: ctx["exact"]["metadata"]["resourceVersion"]
             == ctx["b"]["metadata"]["resourceVersion"]),
        Fact("the other list's is newer", lambda ctx: int(ctx["newer"]["metadata"]["resourceVersion"])
             > int(ctx["b"]["metadata"]["resourceVersion"])),
    )),
    Case("list: what resourceVersionMatch goes with", (
        Call("GET", LEASES, query={"resourceVersionMatch": "NotOlderThan"}),
        Call("GET", LEASES, query={"resourceVersionMatch": "Exact", "resourceVersion": "0"}),
        Call("GET", LEASES, query={"resourceVersionMatch": "Bogus", "resourceVersion": "1"}),
        Call("GET", LEASES, query={"resourceVersionMatch": "Exact", "resourceVersion": "5", "continue": "x"}),
        Call("GET", LEASES, query={"sendInitialEvents": "true"}),
        Call("GET", LEASES, query={"resourceVersion": "abc"}),
        Call("GET", LEASES, query={"resourceVersion": "-1", "resourceVersionMatch": "Exact"}),
        Call("GET", LEASES + "/x", query={"resourceVersion": "abc"}),
    )),
    Case("list: too new a resourceVersion", (
        Call("GET", LEASES, query={"resourceVersion": "999999999"}),
    ), seconds=3),
    Case("get: too new a resourceVersion", (
        Call("POST", LEASES, lease("a"), show=code),
        Call("GET", LEASES + "/a", query={"resourceVersion": "999999999"}),
    ), seconds=3),
]


@pytest.mark.parametrize("case", params(CASES))
def test_watch(case: Case, differential: Callable[[Case], None]) -> None:
    differential(case)

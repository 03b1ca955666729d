"""The differences kept between kubesim and kube-apiserver, each pinned exactly.

A case named here must still differ in exactly the leaves ``known.json`` records for it
(``path -> [kubesim's value, kube-apiserver's value]``, after normalising): when kubesim changes
so that the difference goes or grows, the case fails and its entry is mended or removed. Every
other case must agree leaf for leaf.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PINNED: dict[str, dict[str, list[Any]]] = json.loads((Path(__file__).with_name("known.json")).read_text())


@dataclass(frozen=True)
class Known:
    reason: str
    diff: dict[str, tuple[Any, Any]]


def _kept(case: str, reason: str) -> tuple[str, Known]:
    return case, Known(reason, {path: (pair[0], pair[1]) for path, pair in _PINNED[case].items()})


KNOWN_DIFFERENCES: dict[str, Known] = dict([
    _kept("job: a struct in an invalid value",
          "a struct in an Invalid value is printed from upstream's internal type (Go field names, every "
          "field, nil as null); kubesim prints the JSON of the object it has"),
    _kept("job: the template is immutable",
          "the same, for the whole Pod template of an immutable-field error"),
    _kept("pod: what an update may change",
          "upstream appends a diff of its internal PodSpec to the forbidden-update message; kubesim names "
          "the changed fields"),
    _kept("field validation: a strict patch",
          "an unknown field in a patch under Strict: upstream answers 422 quoting the whole patched "
          "object, kubesim the 400 strict decoding error of a create"),
    _kept("field validation: the default",
          "without fieldValidation kube-apiserver warns of unknown fields (Warn); kubesim ignores them "
          "(kubectl always names a directive, and other clients skip the walk)"),
    _kept("managed fields: a write that names no manager",
          "kube-apiserver tracks every write's fields under its user agent; kubesim only once a write "
          "names a fieldManager (most of its writes skip the field walk)"),
    _kept("leases: the coordinated leader election fields",
          "kubesim keeps a Lease's strategy and preferredHolder as with the CoordinatedLeaderElection "
          "gate on; kube-apiserver 1.34 with default gates drops them"),
    _kept("admission: a ValidatingAdmissionPolicy (CEL)",
          "kubesim serves no admissionregistration.k8s.io and runs no CEL admission"),
])

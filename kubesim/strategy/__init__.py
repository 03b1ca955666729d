"""Registry strategies: what kube-apiserver does to an object between decoding and storing it.

Layer: kubesim (imports nothing from batchd; CronJob schedules are parsed by the standalone
``cronexpr``, batchd's parser too). Called by the kubesim server on every create and update (main
resource and ``/status``) after it assigned the server-owned metadata (uid, name,
namespace, creationTimestamp) and before it stores the object. Objects are plain JSON dicts as
received over HTTP; every function returns a new dict and never mutates its arguments.

Per kind this does, in upstream order: prune unknown fields (:mod:`kubesim.schema`), apply the
defaults of ``pkg/apis/*/v1/defaults.go``, run the strategy's ``PrepareForCreate`` /
``PrepareForUpdate`` (status and spec separation, generation, Job selector generation) and the
validation of ``pkg/apis/*/validation``. A failed validation raises ``422 Invalid`` with one
cause per field, worded as upstream's ``field.Error`` (clients and tests match on the text).

One module per kind, as upstream splits ``pkg/registry/<group>/<resource>/strategy.go``:
:mod:`.job`, :mod:`.cronjob`, :mod:`.pod`, :mod:`.namespace`, :mod:`.event` (both groups) and
:mod:`.lease`; :mod:`.common` holds what they share (field errors, name syntax, ObjectMeta) and
:mod:`.registry` maps each kind to its strategy. Rule ids (``# API-13``) are those of
``docs/kubesim.md`` (API rules).
"""

from __future__ import annotations

from kubesim.strategy.registry import decoded, prepare_create, prepare_update, zero

__all__ = [
    "decoded",
    "prepare_create",
    "prepare_update",
    "zero",
]

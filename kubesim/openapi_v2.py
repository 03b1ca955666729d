"""``/openapi/v2``: the Swagger 2.0 form of the served OpenAPI, as JSON or as gnostic protobuf.

Layer: kubesim (imports nothing from batchd). kubectl up to 1.28 reads this document, always
as protobuf, before ``apply --server-side``: it looks for the PATCH operation of the object's group-version-kind and
for a ``fieldValidation`` parameter on it, and it parses every definition (a ``$ref`` to a
missing one is an error). Newer kubectl reads ``/openapi/v3``.

The document is derived from the served OpenAPI 3.0 documents (:mod:`kubesim.schema`), so both
say the same thing: ``#/components/schemas/X`` becomes ``#/definitions/X``, a request body
becomes a ``body`` parameter, a ``oneOf`` of int and string becomes upstream's Swagger
spelling (``type: string``, ``format: int-or-string``; a Quantity is a string).

The protobuf messages are gnostic's ``openapi.v2`` (field numbers from its published
``OpenAPIv2.proto``). Only what the document uses is written; vendor extensions and defaults
are YAML (JSON is YAML) in ``Any.yaml``, as gnostic writes them.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from typing import Any

from kubesim import schema

# kubectl asks with an ``@`` (``…spec.v2@v1.0+protobuf``), which is not a media-type token
# character: the answer carries the dotted spelling, as the API server's does, or Go's
# mime.ParseMediaType refuses it.
ACCEPTED_PROTOBUF = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
                     "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
MEDIA_TYPE_PROTOBUF = ACCEPTED_PROTOBUF[1]

_V3_REF, _V2_REF = "#/components/schemas/", "#/definitions/"
_VERBS = ("get", "put", "post", "delete", "options", "head", "patch")


# --- the Swagger 2.0 JSON document ------------------------------------------------------------


def _v2_schema(s: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in s.items():
        if key == "$ref":
            out["$ref"] = value.replace(_V3_REF, _V2_REF)
        elif key == "allOf" and len(value) == 1 and "$ref" in value[0]:
            out["$ref"] = value[0]["$ref"].replace(_V3_REF, _V2_REF)
        elif key in ("oneOf", "anyOf"):
            out.setdefault("type", "string")  # int-or-string and Quantity: strings in Swagger 2.0
        elif key == "properties":
            out[key] = {name: _v2_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _v2_schema(value)
        elif key != "nullable":
            out[key] = value
    return out


def _v2_parameter(p: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in p.items() if k != "schema"}
    out["type"] = p.get("schema", {}).get("type", "string")
    if p.get("schema", {}).get("uniqueItems"):
        out["uniqueItems"] = True
    return out


def _v2_operation(op: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in op.items()
                           if k in ("description", "operationId") or k.startswith("x-")}
    params = [_v2_parameter(p) for p in op.get("parameters", [])]
    body = op.get("requestBody")
    if body:
        types = list(body["content"])
        out["consumes"] = types
        params.insert(0, {"name": "body", "in": "body", "required": bool(body.get("required")),
                          "schema": _v2_schema(body["content"][types[0]]["schema"])})
    if params:
        out["parameters"] = params
    responses: dict[str, Any] = {}
    for code, resp in op.get("responses", {}).items():
        entry: dict[str, Any] = {"description": resp.get("description", "")}
        content = resp.get("content") or {}
        if content:
            out.setdefault("produces", list(content))
            entry["schema"] = _v2_schema(next(iter(content.values()))["schema"])
        responses[code] = entry
    out["responses"] = responses
    return out


@cache
def _document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for gv in schema.openapi_v3_index()["paths"]:
        doc = schema.openapi_v3_document(gv) or {}
        for name, s in doc.get("components", {}).get("schemas", {}).items():
            definitions[name] = _v2_schema(s)
        for path, item in doc.get("paths", {}).items():
            v2: dict[str, Any] = {verb: _v2_operation(item[verb]) for verb in _VERBS if verb in item}
            if item.get("parameters"):
                v2["parameters"] = [_v2_parameter(p) for p in item["parameters"]]
            paths[path] = v2
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "kubesim"},
            "paths": dict(sorted(paths.items())), "definitions": dict(sorted(definitions.items()))}


@cache
def document_json() -> str:
    """The whole Swagger 2.0 document, every served group version in one, as JSON text."""
    return json.dumps(_document(), separators=(",", ":"))


# --- gnostic protobuf ------------------------------------------------------------------------
# Fields: (number, value) with value bytes (a nested message or a string), an int (a varint:
# bool, int64) or a float (a double).


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _message(*fields: tuple[int, bytes | str | int | float | None]) -> bytes:
    out = bytearray()
    for number, value in fields:
        if value is None or value is False:
            continue
        if isinstance(value, bool | int):
            out += _varint(number << 3) + _varint(int(value))
        elif isinstance(value, float):
            out += _varint(number << 3 | 1) + struct.pack("<d", value)
        else:
            data = value.encode() if isinstance(value, str) else value
            out += _varint(number << 3 | 2) + _varint(len(data)) + data
    return bytes(out)


def _any(value: Any) -> bytes:  # Any: yaml = 2
    return _message((2, json.dumps(value)))


def _extensions(obj: dict[str, Any], number: int) -> list[tuple[int, bytes]]:  # NamedAny: name 1, value 2
    return [(number, _message((1, k), (2, _any(v)))) for k, v in obj.items() if k.startswith("x-")]


def _strings(number: int, values: list[str]) -> list[tuple[int, str]]:
    return [(number, v) for v in values]


def _schema(s: dict[str, Any]) -> bytes:
    props = s.get("properties")
    additional = s.get("additionalProperties")
    fields: list[tuple[int, Any]] = [
        (1, s.get("$ref")), (2, s.get("format")), (4, s.get("description")),
        (5, _any(s["default"]) if "default" in s else None),
        (11, s.get("maxLength")), (12, s.get("minLength")),
        (13, s.get("pattern")), (16, s.get("uniqueItems")),
        *_strings(19, s.get("required", [])),
        *[(20, _any(v)) for v in s.get("enum", [])],
    ]
    if isinstance(additional, dict):  # AdditionalPropertiesItem: schema 1, boolean 2
        fields.append((21, _message((1, _schema(additional)))))
    elif isinstance(additional, bool):
        fields.append((21, _message((2, int(additional)))))
    if "type" in s:  # TypeItem: value 1 (repeated)
        fields.append((22, _message((1, s["type"]))))
    if isinstance(s.get("items"), dict):  # ItemsItem: schema 1 (repeated)
        fields.append((23, _message((1, _schema(s["items"])))))
    if props:  # Properties: additional_properties 1, NamedSchema (name 1, value 2)
        fields.append((25, _message(*[(1, _message((1, k), (2, _schema(v)))) for k, v in props.items()])))
    fields += [(27, s.get("readOnly"))] + _extensions(s, 31)
    return _message(*fields)


def _parameter(p: dict[str, Any]) -> bytes:
    """ParametersItem{parameter 1: Parameter{body 1 | non_body 2: NonBodyParameter{query 3 | path 4}}}."""
    if p["in"] == "body":  # BodyParameter: description 1, name 2, in 3, required 4, schema 5
        inner = _message((1, _message((1, p.get("description")), (2, p["name"]), (3, "body"),
                                      (4, p.get("required")), (5, _schema(p["schema"])))))
    else:
        # Query: required 1, in 2, description 3, name 4, type 6, unique_items 20.
        # Path: required 1, in 2, description 3, name 4, type 5, unique_items 19.
        query = p["in"] != "path"
        sub = _message((1, p.get("required")), (2, p["in"]), (3, p.get("description")), (4, p["name"]),
                       (6 if query else 5, p.get("type")), (20 if query else 19, p.get("uniqueItems")))
        inner = _message((2, _message((3 if query else 4, sub))))
    return _message((1, inner))


def _operation(op: dict[str, Any]) -> bytes:
    """Operation: description 3, operation_id 5, produces 6, consumes 7, parameters 8, responses 9,
    vendor_extension 13."""
    codes = []
    for code, resp in op.get("responses", {}).items():
        # Response: description 1, schema 2 (SchemaItem: schema 1); ResponseValue: response 1;
        # NamedResponseValue: name 1, value 2; Responses: response_code 1
        response = _message((1, resp.get("description")),
                            (2, _message((1, _schema(resp["schema"]))) if "schema" in resp else None))
        codes.append((1, _message((1, code), (2, _message((1, response))))))
    return _message((3, op.get("description")), (5, op.get("operationId")),
                    *_strings(6, op.get("produces", [])), *_strings(7, op.get("consumes", [])),
                    *[(8, _parameter(p)) for p in op.get("parameters", [])],
                    (9, _message(*codes)), *_extensions(op, 13))


@cache
def document_protobuf() -> bytes:
    """Document: swagger 1, info 2 (title 1, version 2), paths 8 (Paths: path 2, NamedPathItem),
    definitions 9 (Definitions: additional_properties 1, NamedSchema)."""
    doc = _document()
    items = []
    for path, item in doc["paths"].items():
        # PathItem: get 2, put 3, post 4, delete 5, options 6, head 7, patch 8, parameters 9
        fields: list[tuple[int, Any]] = [(2 + i, _operation(item[verb])) for i, verb in enumerate(_VERBS) if verb in item]
        fields += [(9, _parameter(p)) for p in item.get("parameters", [])]
        items.append((2, _message((1, path), (2, _message(*fields)))))
    definitions = [(1, _message((1, name), (2, _schema(s)))) for name, s in doc["definitions"].items()]
    return _message((1, doc["swagger"]), (2, _message((1, doc["info"]["title"]), (2, doc["info"]["version"]))),
                    (8, _message(*items)), (9, _message(*definitions)))

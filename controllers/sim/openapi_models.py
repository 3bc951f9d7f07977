"""Field schemas for the simulator's OpenAPI v3 documents, so ``kubectl explain`` can list fields.

A real API server serves the OpenAPI schemas generated from its Go types. The simulator has no Go
types, but the ``kubernetes`` package ships models generated from those same schemas: for each one,
``openapi_types`` (attribute -> type, e.g. ``List[V1Container]``), ``attribute_map`` (attribute ->
JSON name) and, per field, the description and whether it is required. ``SchemaBuilder.kind`` turns the
model of a built-in kind into an OpenAPI v3 schema, plus one component schema per model it
refers to (``$ref``, as the real documents do), named ``io.k8s.model.<Name>`` with the model's
version prefix dropped (``V1PodSpec`` -> ``PodSpec``): kubectl explain shows a reference by the last
segment of its name, so a field reads ``spec <PodSpec>`` as it does against a real cluster.

What is simpler than the real documents: reference-typed fields carry their type's description
(the models drop the field's own: ``metadata`` reads "ObjectMeta is metadata that all persisted
resources must have..."); IntOrString, Quantity and RawExtension fields, typed ``object``
in the models, show as ``<Object>``; there are no ``x-kubernetes-*`` patch extensions. kubectl uses
these documents only to explain: it validates fields server-side (``fieldValidation``), and the
v2 document it reads strategic-merge metadata from is unchanged. Kinds without a model (custom
resources) keep their stub.

The models are imported on the first request for a document, not with the simulator.
"""

from __future__ import annotations

import re
from typing import Any

_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
_VERSION_PREFIX = re.compile(r"^(?:[A-Z][a-z]+)*V\d+(?:alpha\d+|beta\d+)?(?=[A-Z])")
COMPONENT_PREFIX = "io.k8s.model."

_PRIMITIVES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytearray": {"type": "string", "format": "byte"},
    "object": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}


def _models() -> Any:
    from kubernetes.client import models

    return models


def model_for(group: str, version: str, kind: str) -> type | None:
    """The ``kubernetes`` model class of a built-in kind (``V1Pod``, ``CoreV1Event``...), or None."""
    models = _models()
    ver = version[:1].upper() + version[1:]
    prefix = "Core" if not group else group.split(".")[0].capitalize()
    for name in (f"{prefix}{ver}{kind}", f"{ver}{kind}"):
        cls = getattr(models, name, None)
        if isinstance(cls, type) and hasattr(cls, "openapi_types"):
            return cls
    return None


def component_name(model_name: str) -> str:
    return COMPONENT_PREFIX + _VERSION_PREFIX.sub("", model_name)


def _description(cls: type) -> str:
    """The first paragraph of a model's docstring: the type's own description."""
    doc = (cls.__doc__ or "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split()) if doc and not doc.startswith("Attributes:") else ""


class SchemaBuilder:
    """Builds the schemas of one OpenAPI document: ``kind`` per kind, ``components`` shared by all
    of them (ObjectMeta, PodSpec... are built once per document, however many kinds use them)."""

    def __init__(self) -> None:
        self.models = _models()
        self.components: dict[str, dict[str, Any]] = {}

    def kind(self, group: str, version: str, kind: str) -> dict[str, Any] | None:
        """The kind's schema (its references land in ``components``), or None without a model."""
        cls = model_for(group, version, kind)
        return None if cls is None else self.object_schema(cls)

    def type_schema(self, type_str: str) -> dict[str, Any]:
        type_str = type_str.strip()
        if type_str in _PRIMITIVES:
            return dict(_PRIMITIVES[type_str])
        m = _LIST.match(type_str)
        if m:
            return {"type": "array", "items": self.type_schema(m.group(1))}
        m = _DICT.match(type_str)
        if m:
            return {"type": "object", "additionalProperties": self.type_schema(m.group(1))}
        cls = getattr(self.models, type_str, None)
        if not isinstance(cls, type) or not hasattr(cls, "openapi_types"):
            return dict(_PRIMITIVES["object"])
        name = component_name(type_str)
        if name not in self.components:
            self.components[name] = {}  # placeholder first: models refer to themselves (JSONSchemaProps)
            self.components[name] = self.object_schema(cls)
        ref: dict[str, Any] = {"allOf": [{"$ref": f"#/components/schemas/{name}"}]}
        description = _description(cls)
        if description:  # the field's own, if the model has one, replaces it
            ref["description"] = description
        return ref

    def object_schema(self, cls: type) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        fields = getattr(cls, "model_fields", {}) or {}
        for attr, type_str in cls.openapi_types.items():
            json_name = cls.attribute_map.get(attr, attr)
            schema = self.type_schema(type_str)
            field = fields.get(attr)
            description = getattr(field, "description", None) if field is not None else None
            if description:
                schema["description"] = description
            properties[json_name] = schema
            if field is not None and field.is_required():
                required.append(json_name)
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        description = _description(cls)
        if description:
            schema["description"] = description
        if required:
            schema["required"] = required
        return schema

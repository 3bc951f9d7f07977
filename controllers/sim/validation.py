"""Object validation the API server performs before anything is stored.

Invalid names and malformed metadata are a 422 ``Invalid`` with field causes, exactly like
apimachinery's field errors; a body whose kind or apiVersion does not belong to the URL is a 400.
Validation runs before any mutation, so a rejected write leaves the store untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from controllers.sim import structural
from controllers.sim.codec import go_json_type
from controllers.sim.errors import StatusError, bad_request, invalid, patch_invalid
from controllers.sim.protobuf import KINDS
from controllers.sim.resources import ResourceType
from controllers.sim.selectors import LABEL_NAME, LABEL_VALUE

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# ConfigMap/Secret data keys: alphanumerics, '-', '_' or '.'.
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_CONFIG_KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                   "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")


def name_errors(rt: ResourceType, name: str, prefix: bool = False) -> list[str]:
    """Why ``name`` is not a valid object name for ``rt`` (empty list when it is). A ``prefix``
    (``generateName``) may end in '-', as a suffix follows it."""
    if prefix and name.endswith("-"):
        name = name[:-1] + "a"
    errors = []
    if rt.dns_label_names:
        if len(name) > 63:
            errors.append("must be no more than 63 characters")
        if not _DNS_LABEL.match(name):
            errors.append(_LABEL_MSG)
        return errors
    if len(name) > 253:
        errors.append("must be no more than 253 characters")
    if not _DNS_SUBDOMAIN.match(name):
        errors.append(_SUBDOMAIN_MSG)
    return errors


# Kinds kube-apiserver's scheme still registers in the long-gone extensions/v1beta1 group: a body
# of one of them is "another version" of the apps or networking kind, not an unknown kind.
_EXTENSIONS_V1BETA1 = frozenset(("Deployment", "DaemonSet", "ReplicaSet", "NetworkPolicy", "Ingress"))


def _scheme_error(rt: ResourceType, api_version: str, kind: str) -> str:
    """Why the scheme cannot turn a body of ``api_version``/``kind`` into ``rt``'s kind: a kind it
    knows in that version (every served built-in kind has a Go type in ``protobuf.KINDS``) has no
    conversion to another kind; any other is not registered at all."""
    if f"{api_version}/{kind}" in KINDS:
        version = api_version.rpartition("/")[2]
        internal = rt.group.split(".")[0] if rt.group else "core"
        return f"converting ({version}.{kind}) to ({internal}.{rt.kind}): unknown conversion"
    return f'no kind "{kind}" is registered for version "{api_version}" in scheme "pkg/runtime/scheme.go:111"'


def check_type(rt: ResourceType, obj: Any, *, patch: bool = False) -> None:
    """That a body (or a patch's result, ``patch``) is of the URL's type, decided as the API server
    decides it: a missing apiVersion or kind of a built-in kind is the URL's; another version of the
    same group is "the API version in the data ... does not match"; any other kind or group is one
    the scheme cannot decode as the URL's kind (400, or the 422 of a patch). A custom resource must
    name its kind (400) and a served version of its group (400); another kind is a 422 on ``kind``."""
    if not isinstance(obj, dict):  # a JSON patch can replace the whole document
        raise patch_invalid(obj, f"json: cannot unmarshal {go_json_type(obj)} into Go value of type "
                                 "map[string]interface {}")
    for field in ("apiVersion", "kind"):  # read before anything else, into a struct of two strings
        value = obj.get(field)
        if value is not None and not isinstance(value, str):
            detail = (f"couldn't get version/kind; json parse error: json: cannot unmarshal {go_json_type(value)} "
                      f"into Go struct field .{field} of type string")
            if patch:
                raise patch_invalid(obj, detail)
            shown = orjson.dumps(obj).decode()
            shown = shown if len(shown) <= 32 else shown[:32] + " ..."
            raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): {detail} ({shown})")
    api_version = obj.get("apiVersion") or ""
    kind = obj.get("kind") or ""
    if not rt.builtin:
        if not kind:
            shown = orjson.dumps(obj).decode()
            raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): Object 'Kind' is "
                              f"missing in '{shown}'")
        if api_version.rpartition("/")[0] != rt.group or not api_version.rpartition("/")[2]:
            raise bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                              f"version ({rt.api_version})")
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            detail = f"json: cannot unmarshal {go_json_type(meta)} into Go value of type v1.ObjectMeta"
            if patch:
                raise patch_invalid(obj, detail)
            raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {detail}')
        if kind != rt.kind:
            raise invalid(kind, rt.group, (meta or {}).get("name") or "",
                          [("kind", f'Invalid value: "{kind}": must be {rt.kind}')])
        return
    api_version = api_version or rt.api_version
    kind = kind or rt.kind
    if (api_version, kind) == (rt.api_version, rt.kind):
        _check_typed_parts(rt, obj, patch)
        return
    group, _, version = api_version.rpartition("/")
    if kind == rt.kind and (group == rt.group or (api_version == "extensions/v1beta1" and kind in _EXTENSIONS_V1BETA1)):
        raise bad_request(f"the API version in the data ({api_version}) does not match the expected API version "
                          f"({rt.api_version})")
    detail = _scheme_error(rt, api_version, kind)
    if patch:
        raise patch_invalid(obj, detail)
    raise bad_request(f'{kind} in version "{version}" cannot be handled as a {rt.kind}: {detail}')


def _check_typed_parts(rt: ResourceType, obj: dict[str, Any], patch: bool) -> None:
    """A built-in kind's metadata, spec and status decode into Go structs: anything but an object
    there fails the decoding (a 400, or a patch's 422) before any field is looked at."""
    for field, go_type in (("metadata", "v1.ObjectMeta"), ("spec", f"{rt.version}.{rt.kind}Spec"),
                           ("status", f"{rt.version}.{rt.kind}Status")):
        value = obj.get(field)
        if value is None or isinstance(value, dict):
            continue
        detail = f"json: cannot unmarshal {go_json_type(value)} into Go struct field {rt.kind}.{field} of type {go_type}"
        if patch:
            raise patch_invalid(obj, detail)
        raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {detail}')


def check_apply_type(rt: ResourceType, doc: dict[str, Any]) -> None:
    """400 unless an apply configuration names the URL's apiVersion and kind (for a custom
    resource, any served version of its group); the message is the GroupVersionKind it named."""
    api_version = doc.get("apiVersion") if isinstance(doc.get("apiVersion"), str) else ""
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else ""
    group, _, version = (api_version or "").rpartition("/")
    if kind == rt.kind and (api_version == rt.api_version or (not rt.builtin and group == rt.group and version)):
        return
    raise bad_request(f"invalid object type: {group}/{version}, Kind={kind}")


def validate_object(rt: ResourceType, obj: dict[str, Any]) -> None:
    """422 for invalid metadata or kind-specific fields; called on every create and update."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes: list[tuple[str, str] | tuple[str, str, str]] = []
    if not isinstance(name, str):
        raise invalid(rt.kind, rt.group, str(name), [("metadata.name", "Invalid value: must be a string")])
    generate = meta.get("generateName")
    if isinstance(generate, str) and generate:
        for msg in name_errors(rt, generate, prefix=True):
            causes.append(("metadata.generateName", f"Invalid value: \"{generate}\": {msg}"))
    if not name:
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    else:
        for msg in name_errors(rt, name):
            causes.append(("metadata.name", f"Invalid value: \"{name}\": {msg}"))
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            causes.append((f"metadata.{field}", "Invalid value: must be a map of strings"))
            continue
        for key in value:
            if len(key) > 316 or not LABEL_NAME.match(key):
                causes.append((f"metadata.{field}", f"Invalid value: \"{key}\": name part must consist of "
                               "alphanumeric characters, '-', '_' or '.'"))
        if field == "labels":
            for label in value.values():
                if len(label) > 63 or not LABEL_VALUE.match(label):
                    causes.append(("metadata.labels", f"Invalid value: \"{label}\": a valid label must be an "
                                   "empty string or consist of alphanumeric characters, '-', '_' or '.'"))
    for field in ("finalizers",):
        value = meta.get(field)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            causes.append((f"metadata.{field}", "Invalid value: must be a list of strings"))
    owners = meta.get("ownerReferences")
    if owners is not None:
        if not isinstance(owners, list) or not all(isinstance(o, dict) and o.get("uid") and o.get("name")
                                                   and o.get("kind") for o in owners):
            causes.append(("metadata.ownerReferences", "Invalid value: uid, name, kind and apiVersion are required"))
    if rt.builtin:
        causes.extend(_kind_errors(rt, obj))
    elif rt.schema is not None:
        causes.extend(structural.validate(rt.schema, obj))
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)


def _kind_errors(rt: ResourceType, obj: dict[str, Any]) -> list[tuple[str, str]]:
    spec = obj.get("spec")
    causes: list[tuple[str, str]] = []
    if rt.plural in ("configmaps", "secrets"):
        for field in ("data", "stringData", "binaryData"):
            data = obj.get(field)
            if data is None:
                continue
            if not isinstance(data, dict):
                causes.append((field, "Invalid value: must be a map"))
                continue
            for key in data:
                if not _CONFIG_KEY.match(key):
                    causes.append((f"{field}[{key}]", f"Invalid value: \"{key}\": {_CONFIG_KEY_MSG}"))
    elif rt.plural == "services":
        if spec is None:
            return []
        if not isinstance(spec, dict):
            return [("spec", "Invalid value: must be an object")]
        ports = spec.get("ports")
        if ports is not None and (not isinstance(ports, list) or not all(
                isinstance(p, dict) and isinstance(p.get("port"), int) and not isinstance(p.get("port"), bool)
                and 0 < p["port"] < 65536 for p in ports)):
            causes.append(("spec.ports", "Invalid value: each port needs a numeric port between 1 and 65535"))
        if "clusterIP" in spec and not isinstance(spec["clusterIP"], str):
            causes.append(("spec.clusterIP", "Invalid value: must be a string"))
    elif rt.plural == "pods":
        if not isinstance(spec, dict):
            return [("spec", "Required value")]
        causes.extend(_pod_spec_errors(spec, "spec"))
    elif rt.plural in ("deployments", "replicasets"):
        if not isinstance(spec, dict):
            return [("spec", "Required value")]
        causes.extend(_workload_errors(spec))
    elif rt.plural == "customresourcedefinitions":
        if not isinstance(spec, dict):
            return [("spec", "Required value")]
        names = spec.get("names") or {}
        if not spec.get("group"):
            causes.append(("spec.group", "Required value"))
        if not names.get("plural") or not names.get("kind"):
            causes.append(("spec.names", "Required value: plural and kind are required"))
        if not spec.get("versions"):
            causes.append(("spec.versions", "Required value"))
        expected = f"{names.get('plural')}.{spec.get('group')}"
        name = (obj.get("metadata") or {}).get("name")
        if names.get("plural") and spec.get("group") and name != expected:
            causes.append(("metadata.name", f"Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"))
    return causes


def _workload_errors(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """ValidateDeploymentSpec / ValidateReplicaSetSpec: replicas, selector, and the template the
    selector must select."""
    causes: list[tuple[str, str]] = []
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, int) and replicas < 0:
        causes.append(("spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0"))
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        causes.append(("spec.selector", "Required value"))
        matches = None  # a nil selector selects nothing
    elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
        causes.append(("spec.selector", f"Invalid value: {_go_value(selector)}: empty selector is invalid for "
                                        "deployment"))
        matches = None
    else:
        try:
            matches = selector_from_label_selector_dict(selector)
        except ValueError:
            causes.append(("spec.selector", f"Invalid value: {_go_value(selector)}: invalid label selector"))
            return causes
    template = spec.get("template")
    if not isinstance(template, dict):
        causes.append(("spec.template", "Required value"))
        return causes
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector is None or matches is None or not matches(labels):
        if not (isinstance(selector, dict) and matches is None):  # an empty selector is reported alone
            causes.append(("spec.template.metadata.labels", f"Invalid value: {_go_value(labels)}: `selector` does "
                                                            "not match template `labels`"))
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, dict):
        causes.append(("spec.template.spec.containers", "Required value"))
        return causes
    causes.extend(_pod_spec_errors(pod_spec, "spec.template.spec"))
    restart = pod_spec.get("restartPolicy", "Always")
    if restart != "Always":
        causes.append(("spec.template.spec.restartPolicy", f'Unsupported value: "{restart}": supported values: '
                                                           '"Always"'))
    return causes


def _pod_spec_errors(spec: dict[str, Any], path: str) -> list[tuple[str, str]]:
    """The containers of a PodSpec: at least one, each named (a DNS label, unique) with an image."""
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [(f"{path}.containers", "Required value")]
    causes: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, c in enumerate(containers):
        where = f"{path}.containers[{i}]"
        if not isinstance(c, dict) or not c.get("name"):
            causes.append((f"{where}.name", "Required value"))
        elif c["name"] in seen:
            causes.append((f"{where}.name", f"Duplicate value: \"{c['name']}\""))
        elif not _DNS_LABEL.match(c["name"]) or len(c["name"]) > 63:
            causes.append((f"{where}.name", f"Invalid value: \"{c['name']}\": {_LABEL_MSG}"))
        if isinstance(c, dict):
            if c.get("name"):
                seen.add(c["name"])
            if not c.get("image"):
                causes.append((f"{where}.image", "Required value"))
    return causes


def _go_value(value: Any) -> str:
    """A map or struct value the way a field error prints it (JSON, as %v of a map reads close to it)."""
    return orjson.dumps(value).decode()


def selector_from_label_selector_dict(selector: dict[str, Any]) -> Callable[[dict[str, str]], bool]:
    """A predicate on labels for a LabelSelector's matchLabels and matchExpressions."""
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        raise ValueError("invalid label selector")
    for e in expressions:
        if not isinstance(e, dict) or e.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError("invalid label selector")

    def matches(labels: dict[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in match_labels.items()):
            return False
        for e in expressions:
            key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
            if op == "In" and labels.get(key) not in values:
                return False
            if op == "NotIn" and key in labels and labels[key] in values:
                return False
            if op == "Exists" and key not in labels:
                return False
            if op == "DoesNotExist" and key in labels:
                return False
        return True

    return matches


def immutable_errors(rt: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> list[tuple[str, str]]:
    """What an update may not change: an immutable ConfigMap's or Secret's contents (and the flag)."""
    if not rt.builtin or rt.plural not in ("configmaps", "secrets") or old.get("immutable") is not True:
        return []
    forbidden = "Forbidden: field is immutable when `immutable` is set"
    causes: list[tuple[str, str]] = []
    if new.get("immutable") is not True:
        causes.append(("immutable", forbidden))
    for field in ("data", "binaryData") if rt.plural == "configmaps" else ("data",):
        if (new.get(field) or {}) != (old.get(field) or {}):
            causes.append((field, forbidden))
    return causes


def check_namespace_match(url_ns: str | None, obj: dict[str, Any]) -> None:
    body_ns = (obj.get("metadata") or {}).get("namespace")
    if url_ns and body_ns and body_ns != url_ns:
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")


def check_name_match(url_name: str, obj: dict[str, Any]) -> None:
    body_name = (obj.get("metadata") or {}).get("name")
    if body_name and body_name != url_name:
        raise bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({url_name})")


def too_large() -> StatusError:
    return StatusError(413, "Request entity too large: limit is 3145728")

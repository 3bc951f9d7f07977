"""Printer-column JSONPath: the subset CRDs use, including label keys with escaped dots."""

from controllers.sim.tables import jsonpath_value

OBJ = {"metadata": {"name": "x", "labels": {"demo.ctrlscope.dev/implementation": "handlers"}},
       "spec": {"items": [{"b": 1}]}}


def test_escaped_dots_address_a_single_label_key():
    assert jsonpath_value(OBJ, r".metadata.labels.demo\.ctrlscope\.dev/implementation") == "handlers"


def test_plain_fields_indexes_and_quoted_keys():
    assert jsonpath_value(OBJ, ".metadata.name") == "x"
    assert jsonpath_value(OBJ, ".spec.items[0].b") == 1
    assert jsonpath_value(OBJ, ".metadata.labels['demo.ctrlscope.dev/implementation']") == "handlers"
    assert jsonpath_value(OBJ, ".spec.items[3].b") is None and jsonpath_value(OBJ, ".nope.x") is None

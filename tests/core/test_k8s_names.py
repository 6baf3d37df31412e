"""Kubernetes naming rules, as the API server states them."""

from __future__ import annotations

import pytest

from podwright.core.k8s_names import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)


@pytest.mark.parametrize(
    ("check", "value", "valid"),
    [
        pytest.param(dns1123_label_problem, "primary", True, id="label-ok"),
        pytest.param(dns1123_label_problem, "a-1", True, id="label-dash"),
        pytest.param(dns1123_label_problem, "a" * 63, True, id="label-63"),
        pytest.param(dns1123_label_problem, "a" * 64, False, id="label-64"),
        pytest.param(dns1123_label_problem, "A", False, id="label-upper"),
        pytest.param(dns1123_label_problem, "-a", False, id="label-leading-dash"),
        pytest.param(dns1123_label_problem, "a.b", False, id="label-dot"),
        pytest.param(dns1123_label_problem, "", False, id="label-empty"),
        pytest.param(dns1123_subdomain_problem, "a.b-c", True, id="subdomain-ok"),
        pytest.param(dns1123_subdomain_problem, "a..b", False, id="subdomain-double-dot"),
        pytest.param(dns1123_subdomain_problem, "a" * 254, False, id="subdomain-254"),
        pytest.param(qualified_name_problem, "app", True, id="key-plain"),
        pytest.param(qualified_name_problem, "example.com/App_1.x", True, id="key-prefixed"),
        pytest.param(qualified_name_problem, "/a", False, id="key-empty-prefix"),
        pytest.param(qualified_name_problem, "Example.com/a", False, id="key-bad-prefix"),
        pytest.param(qualified_name_problem, "a/", False, id="key-empty-name"),
        pytest.param(qualified_name_problem, "a b", False, id="key-space"),
        pytest.param(qualified_name_problem, "x/" + "a" * 64, False, id="key-long-name"),
        pytest.param(label_value_problem, "", True, id="value-empty"),
        pytest.param(label_value_problem, "v1.2_3-x", True, id="value-ok"),
        pytest.param(label_value_problem, "a" * 64, False, id="value-long"),
        pytest.param(label_value_problem, "a/b", False, id="value-slash"),
    ],
)
def test_naming_rules(check: object, value: str, valid: bool) -> None:
    assert (check(value) is None) is valid  # type: ignore[operator]

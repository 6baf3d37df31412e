"""Kubernetes naming rules, checked before an object reaches the API server.

The API server rejects a bad container name, label or annotation key with a 422 that names the
object's field but not the podwright argument the user gave. Checking the same rules here lets
every error name the argument instead. Each function returns a description of the problem, or
``None`` when the value is acceptable; callers decide which exception to raise.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
LABEL_VALUE_MAX_LENGTH = 63
NAME_CHECKS_CACHED = 4096
"""Names whose check is remembered, each rule: rendering checks the same label keys, values
and container names over and over (each pod template checks its labels and annotations each
time it is copied with a change), as do the webhooks for each Workload they judge."""
ANNOTATIONS_MAX_SIZE = 256 * 1024
"""The most bytes an object's annotations may hold, keys and values together (apimachinery's
``TotalAnnotationSizeLimitB``)."""
GENERATED_SUFFIX_LENGTH = 5
"""How many random characters (lower-case letters and digits) the API server appends to a
``generateName``, after cutting it so that the name has at most 63 characters."""


@functools.lru_cache(maxsize=NAME_CHECKS_CACHED)
def dns1123_label_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 label (container names, namespaces), or None."""
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        return f"must be at most {DNS1123_LABEL_MAX_LENGTH} characters"
    if not _DNS1123_LABEL.fullmatch(value):
        return (
            "must consist of lower-case letters, digits and '-', "
            "and start and end with a letter or digit"
        )
    return None


@functools.lru_cache(maxsize=NAME_CHECKS_CACHED)
def dns1123_subdomain_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 subdomain (most object names), or None."""
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        return f"must be at most {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return (
            "must consist of lower-case letters, digits, '-' and '.', "
            "and start and end with a letter or digit"
        )
    return None


@functools.lru_cache(maxsize=NAME_CHECKS_CACHED)
def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label or annotation key (``[prefix/]name``), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return "has an empty prefix before '/'"
        prefix_problem = dns1123_subdomain_problem(prefix)
        if prefix_problem:
            return f"prefix {prefix!r} {prefix_problem}"
    if not name:
        return "has an empty name"
    if len(name) > DNS1123_LABEL_MAX_LENGTH:
        return f"name part must be at most {DNS1123_LABEL_MAX_LENGTH} characters"
    if not _QUALIFIED_NAME_PART.fullmatch(name):
        return (
            "name part must consist of letters, digits, '-', '_' or '.', "
            "and start and end with a letter or digit"
        )
    return None


@functools.lru_cache(maxsize=NAME_CHECKS_CACHED)
def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value (empty is allowed), or None."""
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        return f"must be at most {LABEL_VALUE_MAX_LENGTH} characters"
    if value and not _QUALIFIED_NAME_PART.fullmatch(value):
        return (
            "must consist of letters, digits, '-', '_' or '.', "
            "and start and end with a letter or digit"
        )
    return None


def annotation_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid annotation key, or None: a label key, but of either case (the
    API server checks it lower-cased)."""
    return qualified_name_problem(key.lower())


def annotations_size_problem(annotations: Mapping[str, str]) -> str | None:
    """Why ``annotations`` are too large for one object, or None (their UTF-8 bytes count, as the
    API server counts them)."""
    size = sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())
    if size > ANNOTATIONS_MAX_SIZE:
        return (
            f"keys and values together hold {size} bytes, above the limit of "
            f"{ANNOTATIONS_MAX_SIZE} (256 KiB)"
        )
    return None


def generated_name_sample(prefix: str) -> str:
    """A name of the shape the API server generates from the ``generateName`` ``prefix``: the
    prefix, cut to leave room for the random characters, then those (here ``x``), so that the
    checks of a name tell whether every name it generates will do."""
    room = DNS1123_LABEL_MAX_LENGTH - GENERATED_SUFFIX_LENGTH
    return prefix[:room] + "x" * GENERATED_SUFFIX_LENGTH


_NOT_LABEL_CHARACTERS = re.compile(r"[^a-z0-9-]+")


def derived_label(*parts: str, max_length: int = DNS1123_LABEL_MAX_LENGTH) -> str:
    """A DNS-1123 label made from ``parts`` (a volume or container name from a user's name).

    Parts are joined with '-', lower-cased, and characters a label cannot hold become '-'. When
    that changed anything, or the result is longer than ``max_length``, a hash of the
    original parts is appended (the name is truncated to make room), so that two different
    inputs never collide and the same input always gives the same name.
    """
    joined = "-".join(parts)
    cleaned = _NOT_LABEL_CHARACTERS.sub("-", joined.lower()).strip("-")
    if cleaned == joined and len(cleaned) <= max_length:
        return cleaned
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]
    head = cleaned[: max_length - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}" if head else f"x-{digest}"[:max_length]

"""YAML and JSON documents from files or standard input, with the position of every field.

The file system and the YAML libraries live here, behind one exception tree, so the core only ever
sees plain data (dicts, lists, strings, numbers, booleans, None). A :class:`Document` remembers
where each field was written, so a problem the core finds at a field path can be reported at a
line and column of the user's file. YAML is read with ruamel.yaml, which keeps positions, as YAML
1.2 (a superset of JSON); a key written twice in one mapping is an error rather than a silent
overwrite. It is written with PyYAML, whose YAML 1.1 quoting is what kubectl needs.

Exceptions::

    DocumentError                 anything that stops a document from being read
    ├── UnreadableDocumentError   the file or directory cannot be opened, read or decoded as UTF-8
    └── InvalidDocumentError      not well-formed YAML or JSON (or not the one document expected)

Like ``kubectl apply -f``, :func:`read_documents` reads every document of a multi-document
YAML stream, and :func:`document_files` expands a directory into its ``.yaml``, ``.yml`` and
``.json`` files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean

from podwright.core.field_paths import FieldPath

if TYPE_CHECKING:
    from yaml import SafeDumper, ScalarNode

STDIN = "-"
STDIN_NAME = "<stdin>"


class DocumentError(Exception):
    """A document could not be read; ``str()`` names the source and, when known, the line."""

    def __init__(
        self, source: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.source = source
        self.message = message
        self.line = line
        self.column = column
        where = source if line is None else f"{source}:{line}:{column}"
        super().__init__(f"{where}: {message}")


class UnreadableDocumentError(DocumentError):
    """The file cannot be opened, read, or decoded as UTF-8."""


class InvalidDocumentError(DocumentError):
    """The text is not exactly one well-formed YAML or JSON document."""


DOCUMENT_SUFFIXES = (".json", ".yaml", ".yml")
"""The files of a directory that are read, as ``kubectl apply -f DIR`` reads them."""


@dataclasses.dataclass(frozen=True)
class Document:
    """Plain data read from ``source``, and the 1-based (line, column) of each field path.

    ``source`` identifies the document (problems name it); for one document of several in a
    file it is ``file#N``, and ``file`` is the file itself, which :meth:`locate` names with
    the line, counted in the whole file."""

    source: str
    data: object
    positions: Mapping[FieldPath, tuple[int, int]]
    file: str | None = None

    def locate(self, path: FieldPath) -> str:
        """``file:line:column`` of ``path``, or of its nearest ancestor that was written."""
        name = self.file or self.source
        for length in range(len(path), 0, -1):
            position = self.positions.get(path[:length])
            if position is not None:
                return f"{name}:{position[0]}:{position[1]}"
        return self.source


def read_document(source: str, stdin: TextIO) -> Document:
    """Read exactly one document from the file ``source``, or from ``stdin`` when it is ``-``."""
    name = STDIN_NAME if source == STDIN else source
    return parse_document(_read_text(source, stdin), name)


def read_documents(source: str, stdin: TextIO) -> list[Document]:
    """Every document of the file ``source`` (``-``: ``stdin``), empty ones left out, as
    ``kubectl apply -f`` reads a multi-document stream; a file with none is an error."""
    name = STDIN_NAME if source == STDIN else source
    documents = parse_documents(_read_text(source, stdin), name)
    if not documents:
        raise InvalidDocumentError(name, "no document in it")
    return documents


def document_files(names: Sequence[str]) -> list[str]:
    """``names`` with each directory replaced by its files ending in ``.json``, ``.yaml`` or
    ``.yml``, sorted by name (not its subdirectories), as ``kubectl apply -f DIR`` does; a
    directory without any is an error, since nothing in it would be read."""
    files: list[str] = []
    for name in names:
        path = Path(name)
        if name == STDIN or not path.is_dir():
            files.append(name)
            continue
        try:
            found = sorted(
                str(child)
                for child in path.iterdir()
                if child.suffix in DOCUMENT_SUFFIXES and not child.is_dir()
            )
        except OSError as error:
            raise UnreadableDocumentError(name, error.strerror or str(error)) from error
        if not found:
            raise UnreadableDocumentError(
                name, f"a directory without {', '.join(DOCUMENT_SUFFIXES)} files"
            )
        files.extend(found)
    return files


def parse_document(text: str, source: str) -> Document:
    """Parse ``text`` as exactly one YAML or JSON document."""
    nodes = [node for node in _nodes(text, source) if node is not None]
    if len(nodes) != 1:
        found = "no document" if not nodes else f"{len(nodes)} documents"
        raise InvalidDocumentError(source, f"expected one document, found {found}")
    positions: dict[FieldPath, tuple[int, int]] = {}
    return Document(source, _plain(nodes[0], (), positions), positions)


def parse_documents(text: str, source: str) -> list[Document]:
    """Parse ``text`` as a stream of YAML or JSON documents, empty ones left out. When there
    are several, each one's ``source`` is ``source#N`` (N counts from 1) and its ``file``
    is ``source`` (empty documents are counted, as a reader counts the ``---`` lines)."""
    nodes = _nodes(text, source)
    several = sum(node is not None for node in nodes) > 1
    documents = []
    for index, node in enumerate(nodes, start=1):
        if node is None:
            continue
        positions: dict[FieldPath, tuple[int, int]] = {}
        data = _plain(node, (), positions)
        if not several:
            documents.append(Document(source, data, positions))
        else:
            documents.append(Document(f"{source}#{index}", data, positions, file=source))
    return documents


def _read_text(source: str, stdin: TextIO) -> str:
    name = STDIN_NAME if source == STDIN else source
    try:
        return stdin.read() if source == STDIN else Path(source).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise UnreadableDocumentError(
            name, f"not UTF-8 text ({error.reason} at byte {error.start})"
        ) from error
    except OSError as error:
        raise UnreadableDocumentError(name, error.strerror or str(error)) from error


def _nodes(text: str, source: str) -> list[object]:
    """The documents of ``text``, as the YAML library's round-trip nodes (None: empty)."""
    try:
        return list(_reader().load_all(text))
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        message = " ".join(part for part in (error.context, error.problem) if part) or str(error)
        if error.problem == "could not find expected ':'" and error.context_mark is not None:
            # A line that is neither a key with its ':' nor a list item (``instances`` alone):
            # the scanner took it for a key and reports where it gave up looking for the ':'.
            mark = error.context_mark
            line = text.splitlines()[mark.line][mark.column :]
            message = f"{line.split(' #')[0].strip()!r} is not followed by ':'"
        if mark is None:
            raise InvalidDocumentError(source, f"invalid YAML: {message}") from error
        raise InvalidDocumentError(
            source, f"invalid YAML: {message}", mark.line + 1, mark.column + 1
        ) from error
    except YAMLError as error:
        raise InvalidDocumentError(source, f"invalid YAML: {error}") from error


def dump_yaml(data: object) -> str:
    """Block-style YAML as kubectl prints it: keys in the given order, nothing folded.

    kubectl reads YAML 1.1, where ``on``, ``yes`` and ``no`` are booleans; PyYAML's dumper
    follows 1.1 and quotes such strings, so what is printed is read back unchanged by kubectl
    and by YAML 1.2 readers alike. PyYAML is loaded on the first call: commands that print no
    YAML start without it.
    """
    import yaml  # noqa: PLC0415 (see above)

    return yaml.dump(
        data,
        Dumper=_block_dumper(),
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 16,
    )


@functools.cache
def _block_dumper() -> type[SafeDumper]:
    """PyYAML's safe dumper, writing a string of several lines (a script) as a literal block, as
    a person would."""
    import yaml  # noqa: PLC0415 (loaded on first use, see dump_yaml)

    class BlockDumper(yaml.SafeDumper):
        pass

    def represent_text(dumper: SafeDumper, text: str) -> ScalarNode:
        style = "|" if "\n" in text and not text.startswith(" ") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)

    BlockDumper.add_representer(str, represent_text)
    return BlockDumper


def _reader() -> YAML:
    reader = YAML(typ="rt")
    reader.allow_duplicate_keys = False
    return reader


def _plain(node: object, path: FieldPath, positions: dict[FieldPath, tuple[int, int]]) -> object:
    """Round-trip nodes → plain Python values, recording each key's and item's position."""
    if isinstance(node, CommentedMap):
        result: dict[object, object] = {}
        for key, value in node.items():
            plain_key = _plain(key, path, positions)
            if isinstance(plain_key, str | int):
                line, column = node.lc.key(key)
                positions[(*path, plain_key)] = (line + 1, column + 1)
                result[plain_key] = _plain(value, (*path, plain_key), positions)
            else:
                result[plain_key] = _plain(value, path, positions)
        return result
    if isinstance(node, CommentedSeq):
        items: list[object] = []
        for index, item in enumerate(node):
            line, column = node.lc.item(index)
            positions[(*path, index)] = (line + 1, column + 1)
            items.append(_plain(item, (*path, index), positions))
        return items
    # The YAML library's scalars subclass the builtins; return the builtins themselves.
    if isinstance(node, ScalarBoolean):
        return bool(node)
    for builtin in (bool, int, float, str):
        if isinstance(node, builtin):
            return builtin(node)
    if isinstance(node, datetime.date):
        # kubectl reads an unquoted date as the string it spells.
        return node.isoformat()
    return node


def replace_file(name: str, text: str) -> None:
    """Replace the file ``name`` (the file a symbolic link names, if it is one) by ``text`` at
    once: written to a temporary file in its directory, with its mode, then renamed over it, so
    a reader sees the old text or the new, never part of it. Raises OSError, leaving the file
    and no temporary file behind."""
    target = os.path.realpath(name)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    directory, base = os.path.split(target)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise

"""A small docstring reader: the free text and the per-parameter descriptions.

It reads the three styles tools are written in: Google (``Args:`` / ``Arguments:`` /
``Parameters:`` / ``Attributes:`` with ``name (type): text`` or ``name: text``), NumPy
(``Parameters`` over a dashed underline, ``name : type`` with the text indented below) and
Sphinx fields (``:param name: text``). Sections it does not know end the free text and are
otherwise ignored.
"""

from __future__ import annotations

import inspect
import re

import attrs

__all__ = ("ParsedDocstring", "parse_docstring")

# Sections whose entries describe parameters or fields.
_PARAM_SECTIONS = frozenset(
    {"args", "arguments", "parameters", "params", "attributes", "keyword args",
     "keyword arguments", "other parameters"}
)  # fmt: skip
# Any other section name that ends the free text.
_OTHER_SECTIONS = frozenset(
    {"returns", "return", "yields", "yield", "raises", "raise", "examples", "example",
     "notes", "note", "see also", "references", "warnings", "warning", "warns", "todo",
     "methods"}
)  # fmt: skip
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY = re.compile(r"^\**([A-Za-z_]\w*)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:(.*)$")
_NUMPY_ENTRY = re.compile(r"^\**([A-Za-z_][\w, *]*?)\s*(?::.*)?$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?\**([A-Za-z_]\w*)\s*:(.*)$")
_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")


@attrs.frozen
class ParsedDocstring:
    """``description`` is the text before the first section; ``params`` maps names to text."""

    description: str | None
    params: dict[str, str]


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Read ``doc`` (raw ``__doc__``; ``None`` gives an empty result)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    params: dict[str, str] = {}
    free: list[str] = []
    index, in_free = 0, True
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        sphinx = _SPHINX_PARAM.match(stripped)
        numpy_header = index + 1 < len(lines) and _UNDERLINE.match(lines[index + 1])
        google = _GOOGLE_HEADER.match(stripped)
        if numpy_header and _is_section(stripped):
            in_free = False
            body, index = _block(lines, index + 2, _indent(line), numpy=True)
            if stripped.lower() in _PARAM_SECTIONS:
                _read_entries(body, _NUMPY_ENTRY, params, numpy=True)
            continue
        if google and _is_section(google.group(1)):
            in_free = False
            body, index = _block(lines, index + 1, _indent(line), numpy=False)
            if google.group(1).lower() in _PARAM_SECTIONS:
                _read_entries(body, _GOOGLE_ENTRY, params, numpy=False)
            continue
        if sphinx:
            in_free = False
            body, index = _block(lines, index + 1, _indent(line), numpy=False)
            params[sphinx.group(1)] = _join([sphinx.group(2), *body])
            continue
        if stripped.startswith(":"):
            in_free = False
        elif in_free:
            free.append(line)
        index += 1
    description = "\n".join(free).strip()
    return ParsedDocstring(description or None, params)


def _is_section(name: str) -> bool:
    lowered = name.strip().lower()
    return lowered in _PARAM_SECTIONS or lowered in _OTHER_SECTIONS


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block(
    lines: list[str], start: int, header_indent: int, *, numpy: bool
) -> tuple[list[str], int]:
    """The lines of a section body and the index after it.

    A Google body is indented past its header; a NumPy body sits at the header's indent and
    ends at the next underlined header (or at a dedent)."""
    body: list[str] = []
    index = start
    while index < len(lines):
        line = lines[index]
        if line.strip():
            if _indent(line) < header_indent or (not numpy and _indent(line) == header_indent):
                break
            if numpy and index + 1 < len(lines) and _UNDERLINE.match(lines[index + 1]):
                break
        body.append(line)
        index += 1
    return body, index


def _read_entries(
    body: list[str], entry: re.Pattern[str], params: dict[str, str], *, numpy: bool
) -> None:
    indents = [_indent(line) for line in body if line.strip()]
    if not indents:
        return
    base = min(indents)
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for name in names:
            params[name] = _join(text)

    for line in body:
        if line.strip() and _indent(line) == base:
            match = entry.match(line.strip())
            flush()
            if match is None:
                names, text = [], []
                continue
            if numpy:
                names = [n.strip().lstrip("*") for n in match.group(1).split(",") if n.strip()]
                text = []
            else:
                names, text = [match.group(1)], [match.group(2)]
        elif names:
            text.append(line)
    flush()


def _join(parts: list[str]) -> str:
    # A wrapped description is one sentence flow; keep paragraph breaks only.
    paragraphs: list[list[str]] = [[]]
    for part in parts:
        if part.strip():
            paragraphs[-1].append(part.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(p) for p in paragraphs if p)

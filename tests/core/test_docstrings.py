"""The docstring reader behind ``@tool``: free text and parameter descriptions."""

from __future__ import annotations

from prism_core._docstrings import parse_docstring


def test_google_style_with_types_continuations_and_other_sections() -> None:
    """``Args:`` entries with and without types; wrapped lines join; other sections end it."""
    parsed = parse_docstring(
        """Search the catalogue.

        Results are ranked by relevance.

        Args:
            query (str): What to look for,
                in plain words.
            limit: At most this many hits.
            *tags: Ignored stars.

        Returns:
            The hits.

        Raises:
            ValueError: never here.
        """
    )
    assert parsed.description == "Search the catalogue.\n\nResults are ranked by relevance."
    assert parsed.params == {
        "query": "What to look for, in plain words.",
        "limit": "At most this many hits.",
        "tags": "Ignored stars.",
    }


def test_google_arguments_and_attributes_headers() -> None:
    """``Arguments:`` and ``Attributes:`` are parameter sections too."""
    assert parse_docstring("Do it.\n\nArguments:\n    a: first\n").params == {"a": "first"}
    parsed = parse_docstring("A point.\n\n    Attributes:\n        x: across\n        y: up\n")
    assert parsed.params == {"x": "across", "y": "up"}
    assert parsed.description == "A point."


def test_numpy_style() -> None:
    """``Parameters`` over dashes; ``name : type`` with the text indented below; shared lines."""
    parsed = parse_docstring(
        """Scale a vector.

        Parameters
        ----------
        vector : list of float
            The values
            to scale.
        factor : float, optional
            How much.
        lo, hi : float
            Bounds.
        flag

        Returns
        -------
        list of float
            The scaled values.
        """
    )
    assert parsed.description == "Scale a vector."
    assert parsed.params == {
        "vector": "The values to scale.",
        "factor": "How much.",
        "lo": "Bounds.",
        "hi": "Bounds.",
        "flag": "",
    }


def test_sphinx_fields() -> None:
    """``:param name:`` and ``:param type name:`` fields, with continuation lines."""
    parsed = parse_docstring(
        """Send a message.

        :param to: The recipient.
        :param str body: The text,
            possibly long.
        :returns: nothing
        """
    )
    assert parsed.description == "Send a message."
    assert parsed.params == {"to": "The recipient.", "body": "The text, possibly long."}


def test_free_text_only_and_empty() -> None:
    """No sections: all text is the description; no docstring: nothing."""
    parsed = parse_docstring("One line.\n\nUsage: call it.\n")
    assert parsed.description == "One line.\n\nUsage: call it."
    assert parsed.params == {}
    assert parse_docstring(None).description is None
    assert parse_docstring("   ").params == {}


def test_paragraphs_inside_a_description_are_kept() -> None:
    """A blank line inside one parameter's text separates paragraphs."""
    parsed = parse_docstring(
        "X.\n\nArgs:\n    a: first part\n        goes on.\n\n        second.\n"
    )
    assert parsed.params == {"a": "first part goes on.\n\nsecond."}


def test_nested_parentheses_in_types_and_stray_lines() -> None:
    """``name (dict(str, int)): text`` is an entry; a stray line does not extend the last one."""
    parsed = parse_docstring(
        """X.

        Args:
            table (dict(str, int)): Counts.
            See the manual
                for more.
            after: Still read.
        """
    )
    assert parsed.params == {"table": "Counts.", "after": "Still read."}

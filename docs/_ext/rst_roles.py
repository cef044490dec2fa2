"""A griffe extension for the API reference: Sphinx roles in kinema's docstrings become cross-references.

kinema's docstrings use reST roles (``:class:`~kinema.SolverInputError```, ``:func:`solve_two_bone```),
which Markdown would print as they are.  Each becomes an *optional* mkdocs-autorefs reference: a link
when the target is documented in the reference pages, plain code otherwise (never a broken link, never a
``--strict`` warning).  A bare name (``solve_two_bone``) is looked up as ``kinema.<name>``, where every
public object is exported.  ``~`` shows only the last component, as in Sphinx.  A line ending in the
literal-block marker ``::`` ends in ``:`` (the indented block after it renders as code already).
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: ``:role:`target``` or ``:role:`~target``` for the Python roles kinema's docstrings use.
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`<>]+)`")


def _reference(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2).strip()
    identifier = target if "." in target else f"kinema.{target}"
    title = target.rsplit(".", 1)[-1] if short else target
    return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'


#: A reST literal-block marker ending a line (``Example::``); the indented block after it is Markdown code.
_LITERAL_MARKER = re.compile(r"(?<=\S)::[ \t]*$", re.M)


def convert_roles(text: str) -> str:
    """``text`` with every Python role replaced by an optional cross-reference and ``::`` line ends
    shown as ``:`` (the indented block after one already renders as code); other text unchanged."""
    return _LITERAL_MARKER.sub(":", _ROLE.sub(_reference, text))


class RstRoles(griffe.Extension):
    """Rewrites each object's docstring once it is loaded (see the module docstring)."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert_roles(obj.docstring.value)

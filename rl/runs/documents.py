"""Bounded parsing of the JSON and TOML documents that files and command lines hand us.

Python's parsers recurse once per nesting level, so a document nested a few
thousand levels deep raises RecursionError, and they refuse an integer of more
than ``sys.get_int_max_str_digits()`` (4300) decimal digits with a ValueError
that suggests changing the interpreter. A document that parses can still hold
values that later code cannot handle: a nesting deep enough to overflow a
recursive walk, or an integer (written in hexadecimal, say) too long to print.

`parse_json` and `parse_toml` turn all of these into `DocumentError`, one line
saying what is wrong; the configuration files, ``--set`` values and the
checkpoint document are read through them.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

MAX_NESTING = 64
"""Deepest nesting of lists and tables (objects) accepted in a document; the deepest of
this project's own documents (a checkpoint of a PyTorch agent) is about 10."""

_TOML_TOKENS = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[A-Za-z0-9_-]+|[ \t]+|\.|.", re.S)
"""Tokens of a TOML text as far as dotted keys go: a quoted or bare key part, blanks, a dot,
or any other character."""

_INT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 4300
_INT_BITS = int(_INT_DIGITS * math.log2(10))


class DocumentError(ValueError):
    """A document is nested too deeply or holds an integer too long; one-line message."""


def check_document(value: Any, what: str = "The document") -> Any:
    """Return ``value`` after checking its nesting depth and integer sizes, without recursion.

    Parameters
    ----------
    value : any
        A parsed document: dicts, lists and scalars.
    what : str
        How messages name the document, for example ``"Config file 'grid.toml'"``.

    Returns
    -------
    any
        ``value`` itself.

    Raises
    ------
    DocumentError
        If lists and tables nest deeper than `MAX_NESTING`, or an integer has
        more than 4300 digits.
    """
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_NESTING:
                raise DocumentError(f"{what} is nested deeper than {MAX_NESTING} levels.")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, int) and item.bit_length() > _INT_BITS:
            raise DocumentError(f"{what} holds an integer longer than {_INT_DIGITS} digits.")
    return value


def _longest_dotted_key(text: str) -> int:
    """Return the most dots chained between key parts in a TOML text (one linear scan).

    ``tomllib`` needs memory quadratic in the parts of a dotted key, so a key
    of more than `MAX_NESTING` parts is refused before parsing. A dotted value
    such as ``1.5`` counts one dot; a dot inside a quoted string counts none.
    """
    longest = dots = 0
    after = ""  # what the last token that was not a blank was: "part", "dot" or ""
    for token in _TOML_TOKENS.finditer(text):
        kind = token.group()
        if kind.isspace() and "\n" not in kind:
            continue
        if kind == ".":
            dots, after = (dots + 1, "dot") if after == "part" else (0, "")
            longest = max(longest, dots)
        elif kind[0] in "\"'" or kind[0].isalnum() or kind[0] in "_-":
            dots = dots if after == "dot" else 0
            after = "part"
        else:
            dots, after = 0, ""
    return longest


def _refusal(error: BaseException, what: str) -> DocumentError:
    if isinstance(error, RecursionError):
        return DocumentError(f"{what} is nested deeper than {MAX_NESTING} levels.")
    if "integer string conversion" in str(error):
        return DocumentError(f"{what} holds an integer longer than {_INT_DIGITS} digits.")
    return DocumentError(f"{what} does not parse: {' '.join(str(error).split())}")


def parse_json(text: str, what: str = "The document") -> Any:
    """Parse a JSON document with `check_document`'s bounds.

    Raises
    ------
    json.JSONDecodeError
        If the text is not JSON (as ``json.loads``).
    DocumentError
        If it nests too deeply or holds an integer too long (see `check_document`).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as error:
        raise _refusal(error, what) from None
    return check_document(value, what)


def parse_toml(text: str, what: str = "The document") -> dict[str, Any]:
    """Parse a TOML document with `check_document`'s bounds.

    Raises
    ------
    tomllib.TOMLDecodeError
        If the text is not TOML (as ``tomllib.loads``).
    DocumentError
        If it nests too deeply or holds an integer too long (see `check_document`).
    """
    if _longest_dotted_key(text) >= MAX_NESTING:
        raise DocumentError(f"{what} is nested deeper than {MAX_NESTING} levels.")
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except (RecursionError, ValueError) as error:
        raise _refusal(error, what) from None
    return check_document(value, what)

""""Did you mean" for names a user types: policies, options, presets, figure kinds, traces.

One helper so every unknown name reads the same way (difflib's close matches, no import of
anything else in shock).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How alike a typo and a name must be (difflib's ratio); 0.6 is difflib's own default and
# catches one or two wrong letters in the names shock uses.
CUTOFF = 0.6


def close_names(name: str, known: Iterable[str], count: int = 3) -> list[str]:
    """The known names nearest to `name`, best first (none when nothing is close)."""
    choices = list(dict.fromkeys(known))
    found = difflib.get_close_matches(name, choices, n=count, cutoff=CUTOFF)
    if not found and len(name) >= 3:
        # A name typed without its suffix or prefix ("synergy" for "synergy-128").
        found = [c for c in choices if c.startswith(name) or name in c][:count]
    return found


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"did you mean 'x'?" (or "'x' or 'y'"), or "" when no known name is close."""
    found = close_names(name, known)
    if not found:
        return ""
    return "did you mean " + " or ".join(f"'{n}'" for n in found) + "?"


def unknown_name_message(kind: str, name: str, known: Iterable[str], listing: str = "") -> str:
    """"unknown KIND 'name'; did you mean 'x'?" with a pointer to the full list (`listing`,
    e.g. "`shock plugins`"), or the list itself when nothing is close."""
    names = sorted(set(known))
    hint = did_you_mean(name, names)
    if hint:
        where = f" ({listing} lists all {len(names)})" if listing else ""
        return f"unknown {kind} '{name}'; {hint}{where}"
    choices = ", ".join(names) if names else "(none)"
    return f"unknown {kind} '{name}'; valid {kind} names: {choices}"

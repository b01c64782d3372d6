"""`--policy-option key=value`: typed options of a policy, from text.

A policy with options declares them as a frozen dataclass of int/float/bool/str fields with
defaults; `typed_options` builds one from `key=value` texts, converting each value to its
field's type and naming the option in any error. A field named like a Python keyword takes a
trailing underscore (`lambda_`), its option the name without it (`lambda`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from shock.core.errors import InputError
from shock.util.suggest import did_you_mean

T = TypeVar("T")
_FIELD = "--policy-option"


def parse_policy_options(items: Sequence[str]) -> dict[str, str]:
    """`["k=0.1", "num_rounds=8"]` -> `{"k": "0.1", "num_rounds": "8"}`."""
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise InputError(f"'{item}' is not KEY=VALUE", field=_FIELD)
        if key in values:
            raise InputError(f"option '{key}' given twice", field=_FIELD)
        values[key] = value.strip()
    return values


def option_name(field_name: str) -> str:
    return field_name.rstrip("_")


def typed_options(defaults: T, values: Mapping[str, str], policy: str) -> T:
    """`defaults` (a dataclass instance) with the given options replaced, each converted."""
    hints = typing.get_type_hints(type(defaults))
    fields = {option_name(f.name): f.name for f in dataclasses.fields(defaults)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    for key, text in values.items():
        name = fields.get(key)
        if name is None:
            known = ", ".join(sorted(fields))
            hint = did_you_mean(key, fields)
            raise InputError(
                f"policy '{policy}' has no option '{key}'" + (f"; {hint}" if hint else "")
                + f" (its options: {known})",
                field=_FIELD,
            )
        changes[name] = _convert(text, hints[name], f"{_FIELD} {key}")
    try:
        return dataclasses.replace(defaults, **changes)  # type: ignore[type-var]
    except ValueError as exc:  # the options' own checks (__post_init__)
        raise InputError(str(exc), field=_FIELD) from exc


def _convert(text: str, kind: Any, where: str) -> Any:
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise InputError(f"expected true or false, got '{text}'", field=where)
    if kind is int or kind is float:
        try:
            return kind(text)
        except ValueError:
            raise InputError(f"expected {kind.__name__}, got '{text}'", field=where) from None
    return text

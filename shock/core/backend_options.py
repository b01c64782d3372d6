"""A backend's own options: declared by the backend, parsed here, carried by the RunRequest.

A backend with options sets the class attribute `options_type` to a frozen dataclass whose
fields have types (bool, int, float, str, pathlib.Path, or one of them `| None`), defaults and
a help text (`dataclasses.field(default=..., metadata={"help": "..."})`). A field `noise_seed`
is the option `--noise-seed` of `shock run --backend NAME` (also `--backend-option
noise_seed=3`). The dataclass's `__post_init__` may check values by raising ValueError; the
message is shown to the user with the backend's name.

An options type may also define `adjust_run(self, run: RunOptions) -> RunOptions`: it is called
before the run is assembled and may change its settings (the grpc backend's local workers are
the run's cluster).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from shock.core.errors import InputError, ShockError

_SCALARS: dict[type, str] = {bool: "bool", int: "int", float: "float", str: "str", Path: "path"}
_EXPECTED: dict[type, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "text",
    Path: "a path",
}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class BackendOption(NamedTuple):
    """One declared option of a backend."""

    name: str  # the dataclass field
    kind: type  # bool, int, float, str or Path
    optional: bool  # `kind | None`: the default may be None
    default: object
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def metavar(self) -> str:
        return _SCALARS[self.kind]


def options_type_of(backend: object) -> type | None:
    """The backend's options dataclass, or None for a backend without options."""
    options_type = getattr(backend, "options_type", None)
    if options_type is None:
        return None
    if not (isinstance(options_type, type) and dataclasses.is_dataclass(options_type)):
        raise ShockError(f"backend '{_name(backend)}': options_type must be a dataclass")
    return options_type


def declared_options(backend: object) -> tuple[BackendOption, ...]:
    """The options a backend declares, in field order (empty without an options_type)."""
    options_type = options_type_of(backend)
    if options_type is None:
        return ()
    try:
        hints = typing.get_type_hints(options_type)
    except Exception as exc:  # an annotation that does not resolve
        raise ShockError(f"backend '{_name(backend)}': cannot read its options: {exc}") from exc
    options = []
    for item in dataclasses.fields(options_type):
        if not item.init:
            continue
        kind, optional = _scalar_type(hints[item.name])
        if kind is None:
            raise ShockError(
                f"backend '{_name(backend)}': option '{item.name}' has type "
                f"{hints[item.name]}; options are bool, int, float, str or Path (or '| None')"
            )
        if item.default is not dataclasses.MISSING:
            default: object = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            raise ShockError(f"backend '{_name(backend)}': option '{item.name}' has no default")
        help_text = str(item.metadata.get("help", ""))
        options.append(BackendOption(item.name, kind, optional, default, help_text))
    return tuple(options)


def parse_option_items(items: Sequence[str], backend_name: str) -> dict[str, str]:
    """`["noise=0.1", "noise-seed=3"]` -> `{"noise": "0.1", "noise_seed": "3"}`."""
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not key:
            raise InputError(
                f"'{item}' is not KEY=VALUE (backend '{backend_name}')", field="--backend-option"
            )
        if key in values:
            raise InputError(
                f"backend '{backend_name}': option --{key.replace('_', '-')} given twice"
            )
        values[key] = value.strip()
    return values


def options_from_text(backend: object, values: Mapping[str, str]) -> object | None:
    """The backend's options with `values` (option name -> text) converted and applied; None
    for a backend without options (then `values` must be empty)."""
    name = _name(backend)
    options = {option.name: option for option in declared_options(backend)}
    options_type = options_type_of(backend)
    changes: dict[str, Any] = {}
    for key, text in values.items():
        option = options.get(key)
        if option is None:
            raise InputError(unknown_option_message(backend, "--" + key.replace("_", "-")))
        changes[key] = _convert(text, option, name)
    if options_type is None:
        return None
    return _build(options_type, changes, name)


def resolve_backend_options(backend: object, given: object) -> object | None:
    """The options a run of `backend` gets: `given` is KEY=VALUE texts (a tuple of str, as
    `--backend-option` passes them) or an instance of the backend's options_type."""
    options_type = options_type_of(backend)
    if isinstance(given, tuple | list) and all(isinstance(item, str) for item in given):
        return options_from_text(backend, parse_option_items(given, _name(backend)))
    if options_type is not None and isinstance(given, options_type):
        return given
    expected = "KEY=VALUE texts" + (
        "" if options_type is None else f" or a {options_type.__name__}"
    )
    raise ShockError(
        f"backend '{_name(backend)}': options must be {expected}, got {type(given).__name__}"
    )


def unknown_option_message(backend: object, flag: str) -> str:
    name = _name(backend)
    flags = [option.flag for option in declared_options(backend)]
    known = f"its options: {', '.join(flags)}" if flags else "it takes no options"
    return f"backend '{name}' has no option {flag} ({known})"


def _name(backend: object) -> str:
    return str(getattr(backend, "name", type(backend).__name__))


def _scalar_type(annotation: Any) -> tuple[type | None, bool]:
    """(scalar type, optional) of `T` or `T | None`; (None, False) if unsupported."""
    if annotation in _SCALARS:
        return annotation, False
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1 and members[0] in _SCALARS:
            return members[0], True
    return None, False


def _convert(text: str, option: BackendOption, backend_name: str) -> object:
    kind = option.kind
    lowered = text.strip().lower()
    if kind is bool:
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    elif kind is int or kind is float:
        try:
            return kind(text)
        except ValueError:
            pass
    elif kind is Path:
        if text:
            return Path(text)
    else:
        return text
    raise InputError(
        f"backend '{backend_name}': option {option.flag} expects {_EXPECTED[kind]}, "
        f"got '{text}'"
    )


def _build(options_type: type, changes: dict[str, Any], backend_name: str) -> object:
    try:
        return options_type(**changes)
    except ValueError as exc:  # the options' own checks (__post_init__)
        raise InputError(f"backend '{backend_name}': {exc}") from None

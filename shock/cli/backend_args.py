"""`shock run`'s backend options: `--backend-option KEY=VALUE` and the backend's own long
options (`--local-workers 2`), read from the arguments `shock run` itself does not know, and
the backend's section of `shock run --backend NAME --help`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from typer.core import TyperCommand

from shock.core.backend_options import BackendOption, declared_options, unknown_option_message
from shock.core.errors import InputError, ShockError, UnknownPluginError
from shock.core.plugins import default_registry

_BACKEND_ARG = "shock.backend"  # ctx.meta key: the --backend value, for the help text


def peek_backend(args: Sequence[str], default: str = "simulator") -> str:
    """The `--backend` value among raw arguments (the last one given wins, as in parsing)."""
    backend = default
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--backend" and index + 1 < len(args):
            backend = args[index + 1]
        elif arg.startswith("--backend="):
            backend = arg.partition("=")[2]
    return backend


def extra_option_items(args: Sequence[str], backend: object) -> list[str]:
    """`--name value`, `--name=value`, `--flag` and `--no-flag` among the arguments `shock run`
    did not parse, as `name=value` texts for the backend's options."""
    options = {option.flag: option for option in declared_options(backend)}
    items: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("--") or arg == "--":
            raise InputError(f"unexpected argument '{arg}' (`shock run` takes options only)")
        flag, has_value, value = arg.partition("=")
        option = options.get(flag)
        if option is None and flag.startswith("--no-"):
            negated = options.get("--" + flag[len("--no-") :])
            if negated is not None and negated.kind is bool and not has_value:
                items.append(f"{negated.name}=false")
                continue
        if option is None:
            raise InputError(f"`shock run` has no option {flag}, and " +
                             unknown_option_message(backend, flag))  # fmt: skip
        if not has_value:
            if option.kind is bool:
                value = "true"
            elif index < len(args) and not args[index].startswith("--"):
                value = args[index]
                index += 1
            else:
                name = getattr(backend, "name", "?")
                raise InputError(f"backend '{name}': option {flag} needs a value")
        items.append(f"{option.name}={value}")
    return items


def _option_row(option: BackendOption, own_flags: set[str]) -> tuple[str, str, str]:
    """(how to give it, metavar, help with its default) of one option."""
    if option.flag in own_flags:
        # `shock run` has an option of that name itself: only --backend-option reaches it.
        given = f"--backend-option {option.name}=…"
    elif option.kind is bool:
        given = f"{option.flag}/--no-{option.flag[2:]}"
    else:
        given = option.flag
    metavar = "" if option.kind is bool else f"<{option.metavar}>"
    default = "" if option.default is None else f" [default: {option.default}]"
    return given, metavar, option.help + default


def print_backend_help(console: Console, backend: object, own_flags: set[str]) -> None:
    """The backend's options, after `shock run`'s own (`shock run --backend NAME --help`)."""
    backend_name = str(getattr(backend, "name", "?"))
    try:
        options = declared_options(backend)
    except ShockError as exc:
        console.print(f" Backend options: {escape(str(exc))}", highlight=False)
        return
    if not options:
        console.print(
            f" Backend '{escape(backend_name)}' takes no options of its own; "
            "`shock run --backend NAME --help` lists another backend's.",
            highlight=False,
        )
        return
    table = Table(box=None, show_header=False, pad_edge=False, expand=True)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(style="bold yellow", no_wrap=True)
    table.add_column(ratio=1)
    for row in (_option_row(option, own_flags) for option in options):
        table.add_row(*(escape(cell) for cell in row))
    console.print(
        Panel(
            table,
            title=f"Options of backend '{escape(backend_name)}' (or --backend-option KEY=VALUE)",
            title_align="left",
            border_style="dim",
        )
    )


class RunCommand(TyperCommand):
    """`shock run`: its help also lists the chosen backend's options."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # --help is handled while parsing, before --backend has a value: peek at it here.
        ctx.meta[_BACKEND_ARG] = peek_backend(args)
        result: list[str] = super().parse_args(ctx, args)
        return result

    def format_help(self, ctx: Any, formatter: Any) -> None:
        super().format_help(ctx, formatter)
        console = Console(emoji=False)
        try:
            backend = default_registry().get("backend", ctx.meta.get(_BACKEND_ARG, "simulator"))
        except UnknownPluginError as exc:
            console.print(f" Backend options: {escape(str(exc))}", highlight=False)
            return
        own_flags = {flag for param in self.get_params(ctx) for flag in param.opts}
        print_backend_help(console, backend, own_flags)

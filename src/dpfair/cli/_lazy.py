"""A Typer command group that imports a command's module only when that command runs.

``dpfair --help`` and ``dpfair --version`` must answer at once, and ``dpfair median-ci``
must not pay for scikit-learn. The top-level group therefore knows the other commands by
name, module and one-line help only (:data:`LazyGroup.lazy_commands`); the module is
imported, and its ``register(app)`` run, the first time the command is looked up to be
invoked or to print its own help. The one-line help shown in the command list is the
stored text, which a test keeps equal to the command's own docstring.

Also hides the ``<bool>`` type label that recent Typer releases print after every flag, and
turns every usage error (unknown option, missing argument, bad value) into one line on
stderr with exit code 2 instead of Typer's boxed multi-line message.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NoReturn

import click
import typer
import typer.main
from typer.core import TyperGroup

__all__ = ["LazyGroup", "hide_flag_metavars"]


def hide_flag_metavars(command: Any) -> None:
    """Give every flag of ``command`` (and of its sub-commands) an empty metavar.

    A flag takes no value, so its help line should not show one (Typer ≥ 0.2x prints
    ``<bool>``). The ``--help`` option is created on demand, so it is patched as it is made.
    """
    if getattr(command, "_dpfair_flags_hidden", False):
        return
    for param in getattr(command, "params", ()):
        if getattr(param, "is_flag", False) and getattr(param, "metavar", "") is None:
            param.metavar = ""
    original = command.get_help_option

    def get_help_option(ctx: Any, _original: Any = original) -> Any:
        option = _original(ctx)
        if option is not None and getattr(option, "metavar", "") is None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option
    command._dpfair_flags_hidden = True
    for sub in getattr(command, "commands", {}).values():
        hide_flag_metavars(sub)


class LazyGroup(TyperGroup):
    """Typer group with commands registered on first use.

    Subclass it and set :attr:`lazy_commands` to ``{name: (module, one-line help)}``; the
    module must define ``register(app: typer.Typer)`` adding the command ``name`` (and
    possibly others) to ``app``.
    """

    lazy_commands: ClassVar[Mapping[str, tuple[str, str]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listing = False
        hide_flag_metavars(self)

    def list_commands(self, ctx: Any) -> list[str]:
        names = list(super().list_commands(ctx))
        return names + [n for n in self.lazy_commands if n not in names]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy_commands:
            module, short_help = self.lazy_commands[cmd_name]
            if self._listing:  # the command list needs only the name and one line
                return typer.core.TyperCommand(cmd_name, short_help=short_help)
            self._load(module)
            command = super().get_command(ctx, cmd_name)
        if command is not None:
            hide_flag_metavars(command)
        return command

    def _load(self, module: str) -> None:
        registrar = typer.Typer(rich_markup_mode=self.rich_markup_mode)

        @registrar.callback()
        def _group() -> None:  # a callback makes get_command return a group
            """Holder of the registered commands."""

        importlib.import_module(module).register(registrar)
        loaded = typer.main.get_command(registrar)
        for name, command in getattr(loaded, "commands", {}).items():
            self.commands.setdefault(name, command)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the group; in standalone mode a usage error is one line and exit code 2."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args,
                                **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except click.ClickException as exc:
            _one_line_usage_error(exc)
        except click.exceptions.Abort:
            typer.echo("dpfair: aborted.", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _one_line_usage_error(exc: click.ClickException) -> NoReturn:
    """``dpfair: error: <message> (see `dpfair CMD --help`)`` on one line; exit code 2."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # the help text, not an error
        typer.echo(exc.format_message(), err=True)
        sys.exit(exc.exit_code)
    ctx = getattr(exc, "ctx", None)
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else (
        " (see `dpfair COMMAND --help`)")
    message = " ".join(exc.format_message().split())
    typer.echo(f"dpfair: error: {message}{hint}", err=True)
    sys.exit(exc.exit_code if exc.exit_code else 2)

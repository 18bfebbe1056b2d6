"""The ``giod`` group and what every command shares: its options, the federation it opens, its errors.

The command modules (``giod.cli.chain``, ``exchange``, ``replication``,
``serving`` and the commands of ``giod.cli``) import from here and register on
:data:`main`; this module imports none of them, so the imports go one way.
"""

from __future__ import annotations

import copy
import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from giod import config
from giod.errors import ConfigError, GiodError, MissingDependency

DEFAULT_FEDERATION = config.DEFAULT_FEDERATION
EXIT_BAD_INPUT = 2


#: Commands whose modules are heavy (awkward, pyarrow) load when run, so that
#: ``giod --help`` stays fast; their one-line help is given here.
LAZY_COMMANDS = {"demo": "Run the main job end to end on an embedded federation."}
#: Other distributions add commands through this entry-point group (``giod bench``).
PLUGIN_GROUP = "giod.commands"
BENCH_MISSING = (
    "giod bench is not installed: the benchmarks are a separate distribution; from a source "
    "checkout run `make venv` or `pip install -e ./benchmarks`"
)


@functools.cache  # one scan of the installed distributions per process
def plugin_commands() -> dict[str, Any]:
    """The entry points of the ``giod.commands`` group, by command name (not loaded)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}


def _bench_missing() -> click.Command:
    """A stand-in ``giod bench`` that says how to install the benchmarks, whatever its arguments."""

    def missing(args: tuple[str, ...]) -> None:
        raise MissingDependency(BENCH_MISSING)

    return click.Command(
        "bench", callback=missing, add_help_option=False,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        short_help="Benchmarks (not installed: pip install -e ./benchmarks).",
    )


def _usage_line(exc: click.ClickException) -> str:
    """click's own refusal (an unknown option, a missing argument, a bad value) as giod's one ``error:`` line."""
    message = " ".join(exc.format_message().split())  # click puts its "did you mean" on a line of its own
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    if ctx is not None:
        message = message.rstrip(".") + f" (see {ctx.command_path} --help)"
    return f"error: {message}"


class _Group(click.Group):
    """A click group that turns GiodError and click's usage errors into one line and exit code 2, and loads
    heavy commands lazily."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `giod` alone prints the help
        except click.ClickException as exc:  # the group's own options, before any command runs
            click.echo(_usage_line(exc), err=True)
            sys.exit(EXIT_BAD_INPUT)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GiodError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_BAD_INPUT)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `giod schema` alone prints its help
        except click.ClickException as exc:
            click.echo(_usage_line(exc), err=True)
            ctx.exit(EXIT_BAD_INPUT)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS, *plugin_commands(), "bench"})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None:
            return command
        if name == "demo":
            from giod.demo import demo

            command = demo
        elif name in (plugins := plugin_commands()):
            try:
                command = plugins[name].load()
            except ImportError as exc:
                raise MissingDependency(f"giod {name}: its distribution does not import ({exc})") from exc
        elif name == "bench":
            command = _bench_missing()
        else:
            return None
        self.add_command(command, name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # lazy commands are listed from LAZY_COMMANDS, plugins with their distribution's summary: none is imported
        rows = []
        plugins = plugin_commands()
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS and name not in self.commands:
                rows.append((name, LAZY_COMMANDS[name]))
                continue
            if name in plugins and name not in self.commands and plugins[name].dist is not None:
                rows.append((name, plugins[name].dist.metadata["Summary"] or ""))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _chosen_federation(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """The command's ``-f``, else the group's (passed down, not through the environment), else the default."""
    if value is not None:
        return value
    given: str | None = ctx.find_root().params.get("federation")
    return given or config.federation() or DEFAULT_FEDERATION


#: Where a command's own ``--token`` is kept for ``_open`` (the group's is in the root context's params).
_BEARER_META = "giod.bearer"
BEARER_HELP = "Bearer token for a giod server (default: {}); other users see it in the process list."


def _checked_token(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ConfigError("--token is empty: give the token's secret, or leave --token out to use GIOD_TOKEN")
    return value


def _keep_token(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if _checked_token(value) is not None:
        ctx.meta[_BEARER_META] = value


def _chosen_token() -> str | None:
    """The command's ``--token``, else the group's; None leaves it to ``GIOD_TOKEN``."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    own: str | None = ctx.meta.get(_BEARER_META)
    return own if own is not None else ctx.find_root().params.get("token")


def federation_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``-f/--federation`` (and ``--token``, for a server) on a command, as on the group."""
    fn = click.option("--token", default=None, metavar="TOKEN", expose_value=False, callback=_keep_token,
                      help=BEARER_HELP.format("giod --token, else env GIOD_TOKEN"))(fn)
    return click.option(
        "-f", "--federation", "federation", default=None, callback=_chosen_federation, metavar="PATH_OR_URL",
        help=f"Federation directory or catalog URL (default: giod -f, else env GIOD_FEDERATION, "
             f"else {DEFAULT_FEDERATION}).",
    )(fn)


def _open(target: str, create: bool = False) -> Any:
    import giod

    return giod.open(target, create=create, token=_chosen_token())


def hidden_alias(group: click.Group, name: str, command: click.Command) -> None:
    """Accept ``command`` under ``name`` too, left out of the help: one spelling is canonical (``ls``)."""
    alias = copy.copy(command)
    alias.hidden = True
    group.add_command(alias, name)


def _number_id(text: str, what: str, listing: str) -> int:
    """An id typed on the command line, or one clear error naming where ids are listed."""
    if not text.isascii() or not text.isdigit():
        raise ConfigError(f"{what} id {text!r} is not a number (see {listing})")
    return int(text)


@click.group(cls=_Group)
@click.version_option(package_name="giod")
@click.option("-f", "--federation", "federation", default=None, metavar="PATH_OR_URL",
              help="Federation for every command that follows (same as GIOD_FEDERATION).")
@click.option("--token", "token", default=None, metavar="TOKEN", help=BEARER_HELP.format("env GIOD_TOKEN"))
def main(federation: str | None, token: str | None) -> None:
    """giod: a federated object store for particle-physics event data."""
    # a command reads the group's -f and --token from its context: nothing is written to the environment
    _checked_token(token)

"""One help style for every typer command (wire-query, wire-stats, wire-show, wire-import,
wire-export, wire-check, wire-redact; wire-replay and wire-ui can use it too): typer's help with
a one-paragraph summary, then `Examples` (lines kept as written), then the options; `--version`
(recorder.edge adds it) and shell completion (`--install-completion`, `--show-completion`) on
each. wire-proxy parses its own arguments (it starts its agent before typer could be imported)
and prints the same sections itself."""

from __future__ import annotations

from collections.abc import Sequence

import typer


def make_app() -> typer.Typer:
    """The Typer app of one command."""
    return typer.Typer(add_completion=True, rich_markup_mode="rich", no_args_is_help=False,
                       pretty_exceptions_enable=False,
                       context_settings={"help_option_names": ["-h", "--help"]})


def _plain(text: str) -> str:
    # help is rich markup: a `[` from a glob or a table name must stay text
    return text.replace("[", "\\[")


def help_text(summary: str, examples: Sequence[str], *more: str) -> str:
    """`summary`, the `examples` (one command each, shown as written), then paragraphs `more`."""
    parts = [_plain(summary), "[b]Examples[/b]\n\b\n" + "\n".join(f"  {_plain(e)}" for e in examples)]
    parts += [_plain(m) for m in more]
    return "\n\n".join(parts)

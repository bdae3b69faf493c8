"""wire-redact: apply the redaction rules to recordings and transcripts that already exist."""

from __future__ import annotations

import sys

import typer

from wire_recorder.recorder.edge import entry, say
from wire_recorder.recorder.helpstyle import help_text, make_app

PROG = "wire-redact"

app = make_app()


def _in_folder(folder: str) -> list[str]:
    from .inputs import files_below

    return sorted(files_below(folder, "*.db") + files_below(folder, "*.jsonl"))


def _keep(path: str) -> bool:
    return path.endswith((".db", ".jsonl"))


@app.command(help=help_text(
    "Redact secrets in existing recordings, with the rules wire-proxy applies on capture (the "
    "project's config, found from each file's folder upwards, and --config). Each file is "
    "rewritten so that the old bytes are gone from it: a new file (0600) replaces it, and a "
    ".db's .blobs sidecar with it. Exit 0: done; 2: a file could not be read or written (the "
    "others are still done).",
    ["wire-redact sessions/ --dry-run", "wire-redact x.db --config wire-recorder.toml"]))
def redact_cmd(
    paths: list[str] = typer.Argument(..., metavar="PATH...",
                                      help="recordings (.db, with their .blobs) and transcripts "
                                           "(.jsonl), globs, folders"),
    dry_run: bool = typer.Option(False, "--dry-run", help="change nothing; say per session what "
                                 "would change"),
    config: str | None = typer.Option(None, "--config", metavar="FILE",
                                      help="extra rules: a wire-recorder.toml, or a "
                                           "pyproject.toml with [tool.wire-recorder]"),
) -> int:
    from wire_recorder.recorder.errors import UserError

    from .inputs import expand
    from .rewrite import make_redactor, rewrite_all

    files = expand(paths, _in_folder, "no .db or .jsonl files in {}", keep=_keep)
    failed: list[UserError] = []

    def on_error(_path: str, e: Exception) -> None:
        assert isinstance(e, UserError)
        say(PROG, e.one_line())
        failed.append(e)

    results = rewrite_all(files, lambda p: make_redactor(p, config), dry_run=dry_run,
                          on_error=on_error)
    out = sys.stdout
    for r in results:
        if dry_run:
            for s in r.sessions:
                row = " and its session row" if s.session_changed else ""
                out.write(f"{r.path} session {s.session_id}: {s.frames_changed} of {s.frames} "
                          f"frames{row} would change, {s.secrets} secrets\n")
        what = "would change" if dry_run else "changed"
        kept = "" if dry_run or r.written else " (left as it is)"
        out.write(f"{r.path}: {r.frames_changed} of {r.frames} frames {what}, {r.secrets} "
                  f"secrets {'to replace' if dry_run else 'replaced'}{kept}\n")
    out.flush()
    return failed[0].exit_code if failed else 0


main = entry(app, PROG)

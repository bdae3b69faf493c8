"""A scratch environment for one offline run of the real Kimi CLI agent, and its LLM scripts.

kimi runs with the `_scripted_echo` chat provider, a test-only provider kimi-cli ships (no
network, no LLM): each LLM call answers with the next script of the JSON list in the file named
by $KIMI_SCRIPTED_ECHO_SCRIPTS, one string per call, written in a small line-based language (the
helpers at the end of this module write it; kimi's own parser is `kosong/chat_provider/echo/dsl.py`
in the kimi venv). One `KimiRun` owns a temporary folder with a scratch HOME (kimi writes its logs
and session folders under `~/.kimi/`), a work dir, `config.toml` and `scripts.json`, and hands out
the argv and environment for `kimi --wire`. Nothing here starts a process.

    run = KimiRun.create([script(text("hi"))], session_id="s-approve")
    subprocess.Popen(run.argv(), env=run.env(), cwd=run.workdir, ...)
    run.cleanup()
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from tests.harness.peers import find_kimi

CONFIG_TOML = """\
default_model = "echo"
telemetry = false

[models.echo]
provider = "echo"
model = "echo"
max_context_size = {max_context_size}

[providers.echo]
type = "_scripted_echo"
base_url = ""
api_key = ""
"""

# Inherited variables that would change what the agent does or prints. Every inherited KIMI_*
# variable is dropped as well (model overrides, share dir, OAuth hosts, ...).
_DROP_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LOG_LEVEL")


def clean_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default os.environ) without the variables that change kimi's behaviour."""
    env = dict(os.environ if base is None else base)
    for k in list(env):
        if k.startswith("KIMI_") or k in _DROP_ENV:
            del env[k]
    return env


@dataclass
class KimiRun:
    """Scratch environment for running kimi offline. Use `KimiRun.create(...)`.

    The same KimiRun can start several kimi processes in a row (same HOME and work dir, so
    `-S <id>` resumes the session); call `write_scripts` between runs to give the next process
    its own LLM scripts.
    """

    kimi: Path
    root: Path
    home: Path
    workdir: Path
    config_path: Path
    scripts_path: Path
    scripts: list[str] = field(default_factory=list)
    session_id: str | None = None
    keep: bool = False

    @classmethod
    def create(
        cls,
        scripts: Sequence[str],
        *,
        session_id: str | None = None,
        kimi: Path | str | None = None,
        tmp_root: Path | str | None = None,
        max_context_size: int = 100000,
        keep: bool = False,
    ) -> Self:
        exe = Path(kimi) if kimi is not None else find_kimi()
        # realpath: kimi keys its session folder on the canonical work-dir path
        root = Path(
            os.path.realpath(tempfile.mkdtemp(prefix="kimi-run-", dir=str(tmp_root) if tmp_root else None))
        )
        home = root / "home"
        workdir = root / "work"
        home.mkdir()
        workdir.mkdir()
        config_path = root / "config.toml"
        config_path.write_text(CONFIG_TOML.format(max_context_size=int(max_context_size)), encoding="utf-8")
        run = cls(
            kimi=exe,
            root=root,
            home=home,
            workdir=workdir,
            config_path=config_path,
            scripts_path=root / "scripts.json",
            session_id=session_id,
            keep=keep,
        )
        run.write_scripts(scripts)
        return run

    def write_scripts(self, scripts: Iterable[str]) -> None:
        self.scripts = list(scripts)
        for s in self.scripts:
            if not isinstance(s, str):
                raise TypeError(f"echo scripts must be strings, got {type(s).__name__}")
        self.scripts_path.write_text(json.dumps(self.scripts, ensure_ascii=False, indent=1), encoding="utf-8")

    def argv(self, *, session_id: str | None = None, extra: Sequence[str] = ()) -> list[str]:
        """`[kimi, --config-file, cfg, --wire, -w, workdir, (-S id)]`."""
        sid = session_id if session_id is not None else self.session_id
        argv = [str(self.kimi), "--config-file", str(self.config_path), "--wire", "-w", str(self.workdir)]
        if sid:
            argv += ["-S", sid]
        argv += list(extra)
        return argv

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = clean_env(base)
        env["HOME"] = str(self.home)
        env["KIMI_SCRIPTED_ECHO_SCRIPTS"] = str(self.scripts_path)
        return env

    @property
    def log_path(self) -> Path:
        return self.home / ".kimi" / "logs" / "kimi.log"

    def session_dirs(self) -> list[Path]:
        """kimi's own session folders (`~/.kimi/sessions/<hash>/<id>`) created so far."""
        base = self.home / ".kimi" / "sessions"
        return sorted(p for p in base.glob("*/*") if p.is_dir()) if base.exists() else []

    def cleanup(self) -> None:
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


# ---------------------------------------------------------------------------------------------
# The echo scripts: one string per LLM call, one part per line (`id:`, `usage:`, `think:`,
# `text:`, `tool_call:`, `tool_call_part:`; a script `error: ...` simulates a provider error).


def msg_id(v: str) -> str:
    return f"id: {v}"


def usage(input_other: int = 0, output: int = 0, input_cache_read: int = 0, input_cache_creation: int = 0) -> str:
    return "usage: " + json.dumps(
        {
            "input_other": input_other,
            "output": output,
            "input_cache_read": input_cache_read,
            "input_cache_creation": input_cache_creation,
        }
    )


def think(s: str) -> str:
    assert "\n" not in s
    return f"think: {s}"


def text(s: str) -> str:
    assert "\n" not in s  # the language is line based (and kimi strips each line)
    return f"text: {s}"


def tool_call(call_id: str, name: str, arguments: Any) -> str:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": args}, ensure_ascii=False)


def tool_call_part(arguments_part: str) -> str:
    return "tool_call_part: " + json.dumps({"arguments_part": arguments_part}, ensure_ascii=False)


def script(*lines: str) -> str:
    return "\n".join(lines)


def shell(call_id: str, command: str) -> str:
    return tool_call(call_id, "Shell", {"command": command})

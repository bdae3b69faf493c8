"""Locate the real Kimi CLI agent and build a scratch environment for one offline run.

kimi runs with the `_scripted_echo` chat provider (no network, no LLM): each LLM call answers
with the next script of a JSON list (see `shared/protocol/kimi-offline.md`). One `KimiRun` owns a
temporary folder with a scratch HOME, a work dir, `config.toml` and `scripts.json`, and hands out
the argv and environment for `kimi --wire`. Nothing here starts a process.

    run = KimiRun.create(["text: hi"], session_id="s-approve")
    subprocess.Popen(run.argv(), env=run.env(), cwd=run.workdir, ...)
    run.cleanup()
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from wire_recorder.recorder.errors import UserError

KIMI_VERSION = "1.51.0"
ENV_KIMI = "WIRE_KIMI"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PEER = REPO_ROOT / ".peers" / "kimi" / "bin" / "kimi"

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


class PeerMissing(UserError):
    """The real kimi agent is not installed where we look for it."""

    exit_code = 3


def install_hint() -> str:
    return (
        f"install it with `bash scripts/setup-peers` (creates .peers/kimi with Python >= 3.12 and "
        f"`pip install kimi-cli=={KIMI_VERSION}`), or set {ENV_KIMI}=/path/to/kimi"
    )


def _is_executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_kimi(repo_root: Path | None = None) -> Path:
    """Path of the kimi executable: $WIRE_KIMI, else <repo>/.peers/kimi/bin/kimi, else PATH.

    Raises PeerMissing naming every place looked at. An explicit $WIRE_KIMI that does not point
    at an executable is an error (no silent fallback to another kimi).
    """
    explicit = os.environ.get(ENV_KIMI)
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_absolute() and os.sep not in explicit:
            found = shutil.which(explicit)
            if found:
                return Path(found)
        if _is_executable(p):
            return p.absolute()
        raise PeerMissing(
            f"kimi not found: ${ENV_KIMI}={explicit} is not an executable file", install_hint()
        )
    peer = (repo_root / ".peers" / "kimi" / "bin" / "kimi") if repo_root else DEFAULT_PEER
    if _is_executable(peer):
        return peer
    on_path = shutil.which("kimi")
    if on_path:
        return Path(on_path)
    raise PeerMissing(
        f"kimi not found: ${ENV_KIMI} is unset, {peer} does not exist and `kimi` is not on PATH",
        install_hint(),
    )


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
    ) -> "KimiRun":
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

    def __enter__(self) -> "KimiRun":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

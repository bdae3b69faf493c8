"""Where the real peers are, and what a test does when one is missing.

The peers are installed by `bash scripts/setup-peers` into `.peers/`: kimi-cli (`.peers/kimi`),
the ACP client SDK (`.peers/acp`), the two MCP SDK lines (`.peers/mcp2`, `.peers/mcp1`) and the
vendor's Node Wire client (`.peers/node-sdk`, an npm prefix). Each
finder returns a path or raises a PeerMissing that names every place it looked and how to install
the peer. `need(find, what)` turns that into a skipped test, or a failed one under CI, where the
peers must be there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from wire_recorder.recorder.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS = REPO_ROOT / ".peers"

T = TypeVar("T")


class PeerMissing(UserError):
    """A real peer (kimi, an SDK venv, a tool a scenario needs) is not installed. A UserError
    for its message and hint only: no command of the product looks for a peer."""


def need(find: Callable[[], T], what: str) -> T:
    """find() -> the peer; skip the calling test when it is missing, fail it under CI."""
    import pytest

    try:
        return find()
    except PeerMissing as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} missing on CI: {e.one_line()}")
        pytest.skip(e.one_line())


def _is_executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


# -- kimi ---------------------------------------------------------------------------------------

KIMI_VERSION = "1.51.0"
ENV_KIMI = "WIRE_KIMI"
DEFAULT_KIMI = PEERS / "kimi" / "bin" / "kimi"


def kimi_install_hint() -> str:
    return (
        f"install it with `bash scripts/setup-peers` (creates .peers/kimi with Python >= 3.12 and "
        f"`pip install kimi-cli=={KIMI_VERSION}`), or set {ENV_KIMI}=/path/to/kimi"
    )


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
            f"kimi not found: ${ENV_KIMI}={explicit} is not an executable file", kimi_install_hint()
        )
    peer = (repo_root / ".peers" / "kimi" / "bin" / "kimi") if repo_root else DEFAULT_KIMI
    if _is_executable(peer):
        return peer
    on_path = shutil.which("kimi")
    if on_path:
        return Path(on_path)
    raise PeerMissing(
        f"kimi not found: ${ENV_KIMI} is unset, {peer} does not exist and `kimi` is not on PATH",
        kimi_install_hint(),
    )


# -- the ACP client SDK -------------------------------------------------------------------------

ENV_ACP_PYTHON = "WIRE_ACP_PYTHON"
DEFAULT_ACP_PYTHON = PEERS / "acp" / "bin" / "python"
ACP_SDK_VERSION = "0.12.1"


class AcpSdkMissing(PeerMissing):
    """The ACP client SDK venv is not installed where we look for it."""


def find_acp_python() -> Path:
    """The interpreter that has the ACP SDK: $WIRE_ACP_PYTHON, else <repo>/.peers/acp/bin/python."""
    explicit = os.environ.get(ENV_ACP_PYTHON)
    p = Path(explicit).expanduser() if explicit else DEFAULT_ACP_PYTHON
    if _is_executable(p):
        return p  # not resolved: a venv's python is a symlink, resolving it loses the venv
    where = f"${ENV_ACP_PYTHON}={explicit}" if explicit else str(DEFAULT_ACP_PYTHON)
    raise AcpSdkMissing(
        f"ACP client SDK not found: {where} is not an executable file",
        f"install it with `bash scripts/setup-peers` (creates .peers/acp with "
        f"agent-client-protocol=={ACP_SDK_VERSION}), or set {ENV_ACP_PYTHON}=/path/to/python",
    )


# -- the MCP SDKs and reference servers ---------------------------------------------------------


class McpPeerMissing(PeerMissing):
    """An MCP peer venv (or a tool a scenario needs) is not installed."""


def peer_python(venv: str) -> Path:
    """`.peers/<venv>/bin/python`; McpPeerMissing when the venv is not set up."""
    py = PEERS / venv / "bin" / "python"
    if not py.exists():
        raise McpPeerMissing(f"MCP peer venv .peers/{venv} is missing (run: bash scripts/setup-peers)")
    return py


def peer_bin(venv: str, name: str) -> Path:
    exe = PEERS / venv / "bin" / name
    if not exe.exists():
        raise McpPeerMissing(f"{name} is missing from .peers/{venv} (run: bash scripts/setup-peers)")
    return exe


def find_mcp_peers() -> dict[str, Path]:
    """Every peer the MCP scenarios use; McpPeerMissing naming the first one missing."""
    found = {
        "mcp2": peer_python("mcp2"),
        "mcp1": peer_python("mcp1"),
        "mcp-server-time": peer_bin("mcp2", "mcp-server-time"),
        "mcp-server-git": peer_bin("mcp2", "mcp-server-git"),
    }
    git = shutil.which("git")
    if git is None:
        raise McpPeerMissing("git is not on PATH (mcp_git needs it)")
    found["git"] = Path(git)
    return found


# -- the vendor's Node Wire client ---------------------------------------------------------------

ENV_NODE_SDK = "WIRE_NODE_SDK"
DEFAULT_NODE_SDK = PEERS / "node-sdk"
NODE_SDK_PACKAGE = "@moonshot-ai/kimi-agent-sdk"
NODE_SDK_VERSION = "0.1.8"


class NodeSdkMissing(PeerMissing):
    """node, or the vendor's Node SDK install (`.peers/node-sdk`), is not there."""


def find_node_sdk() -> tuple[Path, Path]:
    """(node, the npm prefix holding @moonshot-ai/kimi-agent-sdk at the pinned version):
    $WIRE_NODE_SDK, else <repo>/.peers/node-sdk."""
    import json

    hint = (f"install it with `bash scripts/setup-peers` (needs node >= 18 and npm; creates "
            f".peers/node-sdk with {NODE_SDK_PACKAGE}@{NODE_SDK_VERSION}), or set "
            f"{ENV_NODE_SDK}=/path/to/an/npm/prefix")
    node = shutil.which("node")
    if node is None:
        raise NodeSdkMissing("node is not on PATH (the vendor's Node SDK needs it)", hint)
    explicit = os.environ.get(ENV_NODE_SDK)
    prefix = Path(explicit).expanduser() if explicit else DEFAULT_NODE_SDK
    manifest = prefix / "node_modules" / NODE_SDK_PACKAGE / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        raise NodeSdkMissing(f"{NODE_SDK_PACKAGE} not found: {manifest} is missing or unreadable",
                             hint) from None
    if version != NODE_SDK_VERSION:
        raise NodeSdkMissing(f"{NODE_SDK_PACKAGE} in {prefix} is {version}, the suite pins "
                             f"{NODE_SDK_VERSION}", hint)
    return Path(node), prefix

"""The wheel and sdist built from the tree, and fresh venvs to install them into: what the
install tests (tests/test_install.py) and the DuckDB compatibility test use.

The build runs once per test process (`built_dist`), on a copy of the tree, so that a stale
`build/` folder or the editable install's egg-info in the checkout cannot leak into the wheel, and
the wheel is built from the sdist (`python -m build` does that), which proves the sdist complete.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_PACKAGES = ("recorder", "replay", "analysis")
NAMESPACE = "wire_recorder"
# the files of the product packages that must ship besides the .py files (pyproject.toml's
# package-data globs: *.sql, sql/..., assets/*, py.typed)
DATA_SUFFIXES = (".sql", ".typed", ".html", ".css", ".js", ".json", ".svg", ".png", ".ico")

# what the copy of the tree leaves out: local state, never part of a clone
_IGNORE = shutil.ignore_patterns(".git", ".venv", ".peers", "build", "dist", "__pycache__",
                                 "*.egg-info", ".mypy_cache", ".ruff_cache", ".hypothesis",
                                 ".pytest_cache", "*.db", "*.db.wal", "*.spool", "*.pyc")


@dataclass
class Dist:
    wheel: Path
    sdist: Path
    tree: Path  # the copy of the tree they were built from

    def wheel_names(self) -> list[str]:
        with zipfile.ZipFile(self.wheel) as z:
            return z.namelist()

    def sdist_names(self) -> list[str]:
        with tarfile.open(self.sdist) as t:
            # strip the leading "wire_recorder-0.1.0/"
            return [n.split("/", 1)[1] for n in t.getnames() if "/" in n]

    def console_scripts(self) -> list[str]:
        with zipfile.ZipFile(self.wheel) as z:
            (ep,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
            text = z.read(ep).decode()
        names, section = [], None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "console_scripts" and "=" in line:
                names.append(line.split("=", 1)[0].strip())
        return names


def product_files(tree: Path) -> list[str]:
    """The files of recorder/, replay/ and analysis/ that must ship, relative to the tree."""
    out = []
    for pkg in SOURCE_PACKAGES:
        for p in sorted((tree / pkg).rglob("*")):
            if not p.is_file() or "__pycache__" in p.parts:
                continue
            rel = p.relative_to(tree)
            if p.suffix == ".py" or p.suffix in DATA_SUFFIXES or "assets" in rel.parts:
                out.append(rel.as_posix())
    return out


def _build_isolation_args(python: str) -> list[str]:
    """--no-isolation when this environment has a setuptools the build-system accepts (no
    download needed: works offline); else let `build` fetch one."""
    check = ("import setuptools, sys; "
             "sys.exit(0 if int(setuptools.__version__.split('.')[0]) >= 68 else 1)")
    ok = subprocess.run([python, "-c", check], capture_output=True).returncode == 0
    return ["--no-isolation"] if ok else []


_DIST: Dist | None = None


def built_dist(tmp_root: Path) -> Dist:
    """Build the sdist, then the wheel from it, once per test process."""
    global _DIST
    if _DIST is not None:
        return _DIST
    tree = tmp_root / "tree"
    shutil.copytree(ROOT, tree, ignore=_IGNORE, symlinks=True)
    out = tmp_root / "dist"
    p = subprocess.run([sys.executable, "-m", "build", *_build_isolation_args(sys.executable),
                        "--outdir", str(out), str(tree)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"python -m build failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    _DIST = Dist(wheel=wheel, sdist=sdist, tree=tree)
    return _DIST


def base_python() -> str:
    """The interpreter this venv was made from (>= 3.11, as the project requires)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus what would let the repository or the dev venv leak into a fresh
    venv's processes."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    dev_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and p != dev_bin)
    env.update(extra)
    return env


def pip_install(python: Path, *args: str, timeout: float = 900) -> None:
    """pip install into the venv of `python`, with pip's own cache (what a user's re-install
    reuses)."""
    p = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *args], capture_output=True, text=True, timeout=timeout, env=clean_env())
    assert p.returncode == 0, f"pip install {' '.join(args)} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


def make_venv(path: Path, *requirements: str, python: str | None = None) -> Path:
    """A fresh venv at `path` made by `python` (this venv's interpreter by default) with
    `requirements` installed; returns its bin/ folder."""
    subprocess.run([python or base_python(), "-m", "venv", str(path)], check=True, timeout=300,
                   env=clean_env())
    bin_dir = path / "bin"
    if requirements:
        pip_install(bin_dir / "python", *requirements)
    return bin_dir


def site_packages(bin_dir: Path) -> Path:
    out = subprocess.run([str(bin_dir / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True, env=clean_env())
    return Path(out.stdout.strip())



_VENV: Path | None = None


def wheel_venv(tmp_root: Path) -> Path:
    """bin/ of a fresh venv with the wheel (not editable) and pytest installed, made once per
    test process and shared by every test that needs wire-recorder as a user installs it."""
    global _VENV
    if _VENV is None:
        dist = built_dist(_fresh(tmp_root / "build"))
        _VENV = make_venv(_fresh(tmp_root / "venv") / "v", str(dist.wheel), "pytest")
    return _VENV


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def tool_dir(tmp_root: Path, **tools: Path) -> Path:
    """A folder holding only links named after `tools` (e.g. kimi=...), for a PATH that offers
    those and nothing else of their own venvs."""
    d = _fresh(tmp_root)
    for name, target in tools.items():
        link = d / name
        if not link.exists():
            link.symlink_to(target)
    return d

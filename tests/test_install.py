"""wire-recorder installed like any library: the wheel and sdist built from the tree hold every
module and data file, and a non-editable install in a fresh venv, used from a folder outside the
repository, records the real `kimi --wire` through `wire-proxy`, reads it back with `wire-stats`
and `wire-query`, replays a sample green with `wire-replay`, answers `--help` on every command,
and loads its pytest plugin into an unrelated project that has its own `analysis`, `replay` and
`recorder` packages without shadowing them.

A second venv, made by the interpreter of the kimi peer's venv (Python >= 3.12), records the
real agent too, and stores hostile lines exactly as the suite's interpreter does.

The build (sdist, then the wheel from it) and the venvs are made once per test session."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sample_sessions.scenarios import SCENARIOS
from tests.harness.install import (
    NAMESPACE,
    SOURCE_PACKAGES,
    Dist,
    built_dist,
    clean_env,
    make_venv,
    product_files,
    site_packages,
    wheel_venv,
)
from tests.harness.proxy import db_rows
from tests.harness.replay import SAMPLES, Agent
from tests.harness.wire import check_scenario, run_scenario


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Dist:
    return built_dist(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def venv(dist, tmp_path_factory) -> Path:
    """bin/ of a fresh venv with the wheel (not editable) and pytest installed (one per run,
    shared with the plugin project and docs tests)."""
    return wheel_venv(tmp_path_factory.getbasetemp() / "wheel")


@pytest.fixture(scope="session")
def peer_python_venv(dist, kimi_exe, tmp_path_factory) -> Path:
    """bin/ of a fresh venv with the wheel made by the interpreter of the kimi peer's venv
    (Python >= 3.12, where the suite's own may be 3.11): users install into either."""
    base = subprocess.run([str(kimi_exe.parent / "python"), "-c",
                           "import sys; print(getattr(sys, '_base_executable', sys.executable))"],
                          capture_output=True, text=True, check=True, env=clean_env())
    return make_venv(tmp_path_factory.mktemp("peer-python") / "v", str(dist.wheel),
                     python=base.stdout.strip())


def run(bin_dir: Path, cmd: str, *args: str, cwd: Path, timeout: float = 120,
        **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / cmd), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=clean_env(**env), stdin=subprocess.DEVNULL)


def query(bin_dir: Path, db: Path, sql: str, cwd: Path) -> list[dict[str, str]]:
    p = run(bin_dir, "wire-query", str(db), sql, "--format", "csv", cwd=cwd)
    assert p.returncode == 0, p.stderr
    return list(csv.DictReader(io.StringIO(p.stdout)))


def test_wheel_and_sdist_hold_every_module_and_data_file(dist):
    expected = product_files(dist.tree)
    assert any(f.endswith("pytest_plugin.py") for f in expected)
    wheel = set(dist.wheel_names())
    sdist = set(dist.sdist_names())
    missing_wheel = [f for f in expected if f"{NAMESPACE}/{f}" not in wheel]
    missing_sdist = [f for f in expected if f not in sdist]
    assert missing_wheel == [] and missing_sdist == []
    # one namespace: nothing but wire_recorder/ and the metadata at the wheel's top
    tops = {n.split("/", 1)[0] for n in wheel}
    assert {t for t in tops if not t.endswith(".dist-info")} == {NAMESPACE}
    assert "pyproject.toml" in sdist


def test_nothing_generic_lands_in_site_packages(venv):
    sp = site_packages(venv)
    assert (sp / NAMESPACE / "recorder" / "store.py").exists()
    # not a link back into the checkout: a real copy
    assert not (sp / NAMESPACE / "recorder").is_symlink()
    assert [p.name for p in sp.iterdir() if p.name in SOURCE_PACKAGES] == []
    assert not list(sp.glob("__editable__*wire_recorder*")) and not list(sp.glob("*wire_recorder*.pth"))


def test_every_command_answers_help(venv, dist, tmp_path):
    scripts = dist.console_scripts()
    assert {"wire-proxy", "wire-replay", "wire-query", "wire-stats", "wire-show", "wire-import",
            "wire-export"} <= set(scripts)
    failed = {}
    for name in scripts:
        p = run(venv, name, "--help", cwd=tmp_path)
        if p.returncode != 0 or not p.stdout.strip() or "Traceback" in p.stderr:
            failed[name] = (p.returncode, p.stderr[-1500:])
    assert failed == {}


@pytest.mark.parametrize("python", ["suite", "peer"])
def test_installed_proxy_records_real_kimi_and_the_tools_read_it(python, request, kimi_exe,
                                                                 tmp_path):
    venv = request.getfixturevalue("venv" if python == "suite" else "peer_python_venv")
    db = tmp_path / "smoke.db"
    sc = SCENARIOS["approve_shell"]
    result = run_scenario(sc, [str(venv / "wire-proxy"), "-q", "--db", str(db), "--name", "smoke",
                               "--"], kimi=kimi_exe, env=clean_env())
    assert check_scenario(sc, result) == []
    # the proxy exits before its loader is done: the installed reader waits for it
    sessions = query(venv, db, "select name, protocol, frame_count, exit_code from sessions",
                     cwd=tmp_path)
    assert db.exists()
    assert not list(tmp_path.glob("*.spool")), "the loader left its spool: nothing was loaded"
    assert sessions == [{"name": "smoke", "protocol": "wire",
                         "frame_count": str(len(result.sent()) + len(result.received())),
                         "exit_code": "0"}]
    (row,) = query(venv, db, "select count(*) as n from frames where direction in ('c2a', 'a2c')",
                   cwd=tmp_path)
    assert int(row["n"]) == len(result.sent()) + len(result.received())
    (calls,) = query(venv, db, "select tool_name, approval from tool_calls", cwd=tmp_path)
    assert calls["tool_name"] == "Shell"
    stats = run(venv, "wire-stats", str(db), cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    assert "Shell" in stats.stdout


def test_a_recording_is_the_same_whichever_python_records_it(venv, peer_python_venv, tmp_path):
    """The hostile lines (nested a thousand deep, ids beyond a double, invalid bytes) through the
    installed proxy of each interpreter, `cat` as the agent: every stored column is the same."""
    from tests.test_hostile_frames import STREAM

    stored = []
    for name, bin_dir in (("suite", venv), ("peer", peer_python_venv)):
        db = tmp_path / f"{name}.db"
        p = subprocess.run([str(bin_dir / "wire-proxy"), "-q", "--db", str(db), "--", "cat"],
                           input=STREAM, capture_output=True, timeout=120, env=clean_env(),
                           cwd=tmp_path)
        assert (p.returncode, p.stdout, p.stderr) == (0, STREAM, b"")
        # in each direction's order (seq itself depends on how the two directions interleaved)
        stored.append(db_rows(str(db), "SELECT direction, raw, newline, kind, method, rpc_id, "
                                       "msg_type, payload, parse_error, known, anomaly FROM frames "
                                       "WHERE direction IN ('c2a', 'a2c') ORDER BY direction, seq"))

    def versions() -> list[str]:  # for the failure message only
        return [subprocess.run([str(b / "python"), "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True).stdout
                for b in (venv, peer_python_venv)]
    assert stored[0] == stored[1], versions()
    assert len(stored[0]) == 2 * (STREAM.count(b"\n") + 1)
    assert any(r[8] and "nested deeper than" in r[8] for r in stored[0])


def test_installed_replay_replays_a_sample_green(venv, kimi_exe, tmp_path):
    with Agent("approve_shell", tmp_root=tmp_path) as agent:
        p = run(venv, "wire-replay", "--json", str(SAMPLES / "approve_shell.jsonl"),
                "--frame-timeout", "60", *agent.cli_args(), cwd=tmp_path, timeout=180)
    assert p.returncode == 0, (p.stderr, p.stdout[-3000:])
    report = json.loads(p.stdout)
    assert report["ok"] and report["stats"]["requests_matched"] == 1


PROJECT_TESTS = {
    # runs first (files run in name order), before anything used the fixture
    "tests/test_1_plugin.py": """
        import sys

        def test_the_plugin_is_loaded_and_light(pytestconfig):
            plugin = pytestconfig.pluginmanager.get_plugin("wire_replay")
            assert plugin is not None
            assert plugin.__name__ == "wire_recorder.replay.pytest_plugin"
            heavy = [m for m in ("duckdb", "rich", "typer", "pydantic", "orjson")
                     if m in sys.modules]
            assert heavy == []
            ours = {m for m in sys.modules if m.startswith("wire_recorder.")}
            assert ours <= {"wire_recorder.replay", "wire_recorder.replay.pytest_plugin",
                            "wire_recorder.replay.options"}, ours
        """,
    "tests/test_2_own_packages.py": """
        from pathlib import Path

        import analysis, recorder, replay

        ROOT = Path(__file__).resolve().parents[1]

        def test_the_projects_own_packages_are_imported():
            import wire_recorder.analysis  # here, not at collection: test_1 counts the imports

            for mod in (analysis, recorder, replay):
                assert mod.OWNER == "this project", mod
                assert Path(mod.__file__).resolve().parent.parent == ROOT
            assert Path(wire_recorder.analysis.__file__).resolve().parent.parent.parent != ROOT
        """,
    "tests/test_3_replay.py": """
        import sys

        import pytest

        SAMPLE = "recordings/approve_shell.jsonl"
        AGENT = [str(__import__("pathlib").Path(sys.executable).parent / "wire-replay"), SAMPLE,
                 "--serve"]

        @pytest.mark.wire_replay(SAMPLE, agent=AGENT, frame_timeout=20)
        def test_a_recording_replays(wire_replay):
            assert wire_replay().ok
        """,
}


def test_plugin_in_an_unrelated_project_with_its_own_packages(venv, tmp_path):
    proj = tmp_path / "proj"
    for pkg in SOURCE_PACKAGES:
        (proj / pkg).mkdir(parents=True)
        (proj / pkg / "__init__.py").write_text('OWNER = "this project"\n')
    (proj / "tests").mkdir()
    (proj / "recordings").mkdir()
    shutil.copy(SAMPLES / "approve_shell.jsonl", proj / "recordings")
    (proj / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    for rel, body in PROJECT_TESTS.items():
        (proj / rel).write_text(textwrap.dedent(body))
    p = run(venv, "python", "-m", "pytest", "-p", "no:cacheprovider", "-v", cwd=proj, timeout=180)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "3 passed" in out
    (plugins,) = [ln for ln in p.stdout.splitlines() if ln.startswith("plugins:")]
    assert "wire-recorder" in plugins


def test_the_plugin_module_imports_nothing_heavy():
    """pytest loads the plugin in every run of an environment that has wire-recorder: importing
    it must not pull in duckdb, the CLI libraries or the replay engine."""
    code = ("import json, sys; import wire_recorder.replay.pytest_plugin; "
            "print(json.dumps(sorted(sys.modules)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    assert p.returncode == 0, p.stderr
    loaded = set(json.loads(p.stdout))
    heavy = {"duckdb", "rich", "typer", "pydantic", "orjson"}
    assert {m.split(".")[0] for m in loaded} & heavy == set()
    # what the plugin may load up front: its package (whose exports load on first use) and the
    # Enum of its record modes; anything added here must itself import nothing heavy
    allowed = {NAMESPACE, f"{NAMESPACE}.replay", f"{NAMESPACE}.replay.pytest_plugin",
               f"{NAMESPACE}.replay.options"}
    assert {m for m in loaded if m.startswith(NAMESPACE)} <= allowed

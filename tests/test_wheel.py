"""The wheel installs under one name, `plangate`, and lives beside a team's own `ci/` folder.

A tool that is installed into other teams' repositories must not put generic names such as `ci`
or `evaluators` on `sys.path`. The wheel is built from this checkout and installed into a fresh
virtual environment (its dependencies come from this one's site-packages, so nothing is
downloaded); next to it sits a project with its own `ci/` and `evaluators/` packages. Both must
import as their owners meant, and the installed `plangate` command must run the agent (which
reads the variants from the wheel's package data).
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "replay", "evaluators", "ci")


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of the sources: a `build/` folder left in the checkout could add stale
    # modules to the wheel.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("plangate", *PACKAGES):
        shutil.copytree(
            REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = tmp_path_factory.mktemp("wheel")
    run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
        "-w", out, source,
    )  # fmt: skip
    [built] = out.glob("plangate-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed; its Python."""
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    # The dependencies, from this environment (a plain path: its .pth files are not run, so
    # this checkout's editable install does not come along).
    (Path(purelib.strip()) / "dependencies.pth").write_text(site.getsitepackages()[0] + "\n")
    return python


def test_the_wheel_holds_every_module_under_plangate(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {f"plangate/{p.name}" for p in (REPO / "plangate").glob("*.py")}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            modules.add(f"plangate/{path.relative_to(REPO).as_posix()}")
    assert {n for n in names if n.endswith(".py")} == modules
    expected = {*modules, "plangate/py.typed"}
    expected |= {
        f"plangate/harness/variants/{p.name}"
        for p in (REPO / "harness" / "variants").glob("*.toml")
    }
    expected |= {"plangate/ci/gate.toml", "plangate/harness/py.typed"}
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.split("/")[0] in PACKAGES], "a top-level generic package"


def test_a_projects_own_ci_folder_and_plangate_both_import(installed: Path, tmp_path: Path) -> None:
    for package in ("ci", "evaluators"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(f'WHOSE = "the project\'s {package}"\n')
    code = (
        "import json, ci, evaluators\n"
        "import plangate, plangate.ci, plangate.evaluators, plangate.harness, plangate.replay\n"
        "import ci as again\n"
        "print(json.dumps({'ci': ci.WHOSE, 'evaluators': evaluators.WHOSE, 'again': again.WHOSE,\n"
        "    'plangate': plangate.__file__, 'registered': sorted(plangate.evaluators.evaluators()),\n"
        "    'version': plangate.__version__}))\n"
    )
    found = json.loads(run(installed, "-c", code, cwd=tmp_path))
    assert found["ci"] == found["again"] == "the project's ci"
    assert found["evaluators"] == "the project's evaluators"
    assert "site-packages" in found["plangate"] and str(REPO) not in found["plangate"]
    assert "task_completion" in found["registered"]
    assert found["version"]


def test_the_installed_command_runs_the_agent(installed: Path, tmp_path: Path) -> None:
    # `python -m` puts the project folder first on sys.path: a `ci` of plangate's own at the
    # top level would be the project's here, which fails on import.
    for package in ("ci", "harness", "replay", "evaluators"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("raise ImportError('the project')\n")
    request = ("run", "Sort the LLM spans by latency", "--json")
    result = json.loads(run(installed, "-m", "plangate", *request, cwd=tmp_path))
    assert result["stop_reason"] == "finished"
    command = installed.parent / "plangate"
    assert run(command, "--version", cwd=tmp_path).startswith("plangate ")

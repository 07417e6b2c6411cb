"""The pip install and the conda environment name the same pinned dependencies."""

import re
import tomllib

from support import ROOT


def _pins(lines: list[str]) -> dict[str, str]:
    pins = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;]+)(\s*;.*)?\s*", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_environment_yml_pins_the_same_packages_as_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pyproject = _pins(project["dependencies"])
    conda = _pins(re.findall(r"^\s*-\s+([^#\n]+?)\s*$", (ROOT / "environment.yml").read_text(), re.M))
    assert pyproject, "pyproject.toml pins nothing"
    assert pyproject == conda
    assert pyproject["torch"] == "2.13.0"


def test_every_dependency_is_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dep in project["dependencies"] + project["optional-dependencies"]["dev"]:
        assert "==" in dep, f"{dep} is not pinned"

"""The nix files parse, and the NixOS module keeps the systemd unit's sandbox."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.needs import tool
from tests.service.test_systemd import UNIT, settings

NIX = Path(__file__).resolve().parents[2] / "nix"
FILES = ("babeld.nix", "package.nix", "module.nix", "default.nix")
# Unit settings that the module expresses the NixOS way (paths in the store, the config file
# generated from options instead of /etc/babbler, the key credential from `keyFile`).
NIXOS_OWN = {"ExecStart", "ExecReload", "Documentation", "ConfigurationDirectory", "LoadCredential"}


def parse(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("nix-instantiate", "nix-bin"), "--parse", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", FILES)
def test_nix_file_parses(name: str) -> None:
    result = parse(NIX / name)
    assert result.returncode == 0, result.stderr


def test_the_parser_does_reject_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.nix"
    broken.write_text((NIX / "module.nix").read_text().replace("};\n", "}\n", 1))
    assert parse(broken).returncode != 0


def module_service_config() -> dict[str, list[str]]:
    text = (NIX / "module.nix").read_text()
    block = text.split("serviceConfig = {", 1)[1]
    out: dict[str, list[str]] = {}
    for key, value in re.findall(r'^\s+(\w+) = "([^"]*)";$', block, re.MULTILINE):
        out[key] = [value]
    filters = re.search(r"SystemCallFilter = \[(.*?)\];", block, re.DOTALL)
    assert filters
    out["SystemCallFilter"] = re.findall(r'"([^"]*)"', filters.group(1))
    return out


def test_module_has_the_units_sandbox() -> None:
    service = (UNIT.read_text().split("[Service]", 1)[1]).split("[Install]", 1)[0]
    unit = {k: v for k, v in settings(service).items() if k not in NIXOS_OWN}
    module = {k: v for k, v in module_service_config().items() if k not in NIXOS_OWN}
    assert module == unit


def test_babeld_is_the_release_asked_for_with_its_man_page() -> None:
    text = (NIX / "babeld.nix").read_text()
    assert 'version = "1.13.1"' in text
    assert "babeld-${finalAttrs.version}.tar.gz" in text
    assert '"man"' in text and "MANDIR" in text


def test_the_nix_package_has_every_dependency_pyproject_names() -> None:
    """A dependency added to pyproject.toml and not to package.nix breaks only NixOS users."""
    import tomllib

    pyproject = tomllib.loads((NIX.parent / "pyproject.toml").read_text())
    nix = (NIX / "package.nix").read_text()
    nix_names = {"netifaces-plus": "netifaces"}  # the fork installs nixpkgs' module
    for requirement in pyproject["project"]["dependencies"]:
        name = re.split(r"[<>=;\s\[]", requirement, maxsplit=1)[0]
        wanted = nix_names.get(name, name)
        assert re.search(rf"^\s*{re.escape(wanted)}\b", nix, re.M) or f"[ {wanted} ]" in nix, (
            f"{name} (pyproject.toml) is missing from nix/package.nix"
        )


def test_the_modules_key_reaches_babblerd_as_the_credential_it_reads() -> None:
    from babbler.daemon.keyfile import CREDENTIAL

    text = (NIX / "module.nix").read_text()
    assert f'"{CREDENTIAL}:${{cfg.keyFile}}"' in text and "key-file" not in text
    assert "skip-kernel-setup" not in text and "boot.kernel.sysctl" not in text

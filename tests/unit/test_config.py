from pathlib import Path

import pytest

from babbler.core.config import DEFAULT_HELLO_INTERVAL, down_hold, reloaded
from babbler.core.errors import ConfigError
from babbler.core.platform import LINUX
from babbler.daemon.babeld.launch import babeld_config
from babbler.daemon.cli import load_config as build


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "babblerd.toml"
    path.write_text(text)
    return path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = build({}, None) if not Path("/etc/babbler/babblerd.toml").exists() else None
    if config is None:
        pytest.skip("this machine has a real /etc/babbler/babblerd.toml")
    assert config.mode == "always"  # DESIGN.md: machines with the service reach each other
    assert config.linger == 5.0
    assert config.hello_interval == DEFAULT_HELLO_INTERVAL
    assert config.socket_path == Path("/run/babbler/babblerd.sock")


def test_file_then_flags_win(tmp_path: Path) -> None:
    path = write(tmp_path, 'mode = "always"\nhello-interval = 1\ninterface = ["eth*", "tb*"]\n')
    config = build({"hello-interval": "0.5"}, path)
    assert config.mode == "always"
    assert config.hello_interval == 0.5
    assert config.interface == ("eth*", "tb*")
    assert config.config == path


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"interface": ("",)}, "--interface: empty interface name pattern"),
        ({"exclude": ("a b",)}, "--exclude: not an interface name pattern"),
        ({"node-id": "xyz"}, "--node-id: node id must be 12 hex digits"),
        ({"hello-interval": "0"}, "--hello-interval: must be between"),
        ({"hello-interval": "nan"}, "--hello-interval: must be between"),
        ({"linger": "soon"}, "--linger: expected a number of seconds"),
        ({"mode": "sometimes"}, "--mode: expected one of on-demand, always"),
        ({"run-dir": ""}, "--run-dir: expected a non-empty path"),
    ],
)
def test_bad_flags_name_the_problem(tmp_path: Path, flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        build(flags, write(tmp_path, ""))


def test_bad_file_names_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "hello-interval = -2\n")
    with pytest.raises(ConfigError, match=rf"config {path}: hello-interval: must be between"):
        build({}, path)
    with pytest.raises(ConfigError, match="unknown key 'colour'"):
        build({}, write(tmp_path, 'colour = "red"\n'))
    with pytest.raises(ConfigError, match=r"config .*babblerd\.toml: "):
        build({}, write(tmp_path, "mode = \n"))
    with pytest.raises(ConfigError, match="skip-kernel-setup: expected true or false, got 'yes'"):
        build({}, write(tmp_path, 'skip-kernel-setup = "yes"\n'))


def test_babeld_never_does_the_kernel_setup(tmp_path: Path) -> None:
    assert "skip-kernel-setup true\n" in babeld_config(LINUX)  # babblerd does it (hostsetup.py)
    assert "smoothing-half-life 0" in babeld_config(LINUX)
    assert not build({}, write(tmp_path, "")).skip_kernel_setup
    assert build({}, write(tmp_path, "skip-kernel-setup = true\n")).skip_kernel_setup


def test_an_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        build({}, tmp_path / "absent.toml")


def test_reload_rereads_the_file_and_keeps_flags(tmp_path: Path) -> None:
    path = write(tmp_path, 'mode = "always"\nlinger = 1\n')
    flags = {"linger": "9"}
    first = build(flags, path)
    path.write_text('mode = "on-demand"\nlinger = 2\n')
    second, _ = reloaded(first, build(flags, path))
    assert second.mode == "on-demand"
    assert second.linger == 9.0


def test_one_table_defines_every_setting_its_flag_and_its_reloadability() -> None:
    from click.testing import CliRunner

    from babbler.core.config import SETTINGS, unknown_settings
    from babbler.daemon.cli_command import main

    assert unknown_settings() == set()
    shown = CliRunner().invoke(main, ["--help"], terminal_width=200).output
    for setting in SETTINGS:
        assert f"--{setting.key}" in shown, setting.key
    assert {s.key for s in SETTINGS if s.reloadable} == {
        "name",
        "down-hold",
        "info",
        "mode",
        "linger",
        "interface",
        "exclude",
        "bring-up",
        "hello-interval",
        "log-level",
        "log-format",
        "cost",
    }


@pytest.mark.parametrize(
    ("given", "costs"),
    [
        ({"cost": ("tb*=16", "en*=128")}, (("tb*", 16), ("en*", 128))),
        ({}, ()),
    ],
)
def test_cost_flags(tmp_path: Path, given: dict[str, object], costs: object) -> None:
    assert build(given, write(tmp_path, "")).cost == costs


def test_cost_table_in_the_file(tmp_path: Path) -> None:
    config = build({}, write(tmp_path, '[cost]\n"tb*" = 16\n"en*" = 200\n'))
    assert config.cost == (("tb*", 16), ("en*", 200))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (("tb*",), "--cost: expected GLOB=N, got 'tb\\*'"),
        (("tb*=fast",), "--cost: cost of 'tb\\*' must be a whole number"),
        (("tb*=0",), "--cost: cost of 'tb\\*' must be 1 to 65534"),
        (("tb*=65535",), "--cost: cost of 'tb\\*' must be 1 to 65534"),
        (("a b=3",), "--cost: not an interface name pattern"),
    ],
)
def test_bad_costs_name_the_problem(tmp_path: Path, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build({"cost": value}, write(tmp_path, ""))


def test_node_info_settings_from_flags_and_file(tmp_path: Path) -> None:
    path = tmp_path / "babblerd.toml"
    path.write_text('name = "worker-3"\ninfo-port = 7000\n[info]\nrole = "worker"\ngpus = 8\n')
    config = build({"info": ("rack=a2",)}, path)
    assert config.name == "worker-3" and config.info_port == 7000
    assert config.info == (("rack", "a2"),)  # a flag replaces the file's table
    assert build({}, path).info == (("role", "worker"), ("gpus", 8))
    assert build({}).info_port == 6698 and build({}).name is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"info-port": "70000"}, "info-port: expected a TCP port 1-65535, or 0 for off"),
        ({"info-port": "http"}, "info-port: expected a TCP port"),
        ({"name": ""}, "name: expected a name"),
        ({"name": "a\tb"}, "name: at most 64 printable characters"),
        ({"info": ("role",)}, "info: expected KEY=VALUE"),
        ({"info": ("big=" + "x" * 5000,)}, "info: the fields take more than 4096 bytes"),
        ({"info": ("rack=a\tb",)}, "info: rack must be printable text"),  # peers refuse it
        ({"info": ("rack=\x1b[2J",)}, "info: rack must be printable text"),
    ],
)
def test_bad_node_info_settings_are_named(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build(flags)


def test_an_info_number_other_nodes_would_refuse_is_refused_here(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="info: load must be a finite number"):
        build({}, write(tmp_path, "[info]\nload = nan\n"))


def test_the_down_hold_follows_the_hello_interval_unless_set(tmp_path: Path) -> None:
    assert down_hold(build({})) == 1.0  # hello 0.1: 10 hellos, and at least 1 s
    assert down_hold(build({"hello-interval": "4"})) == 40.0  # babeld's own default
    assert down_hold(build({"down-hold": "2.5"})) == 2.5
    assert down_hold(build({"down-hold": "auto", "hello-interval": "0.5"})) == 5.0
    assert down_hold(build({}, write(tmp_path, "down-hold = 0\n"))) == 0.0  # at once
    with pytest.raises(ConfigError, match="down-hold: must be between 0 and 3600 seconds"):
        build({"down-hold": "-1"})

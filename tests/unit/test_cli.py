"""The command lines as a user runs them: real processes, real exit codes."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from babbler.daemon import sdnotify
from babbler.ui.render import render_status
from tests.guard import no_real_links
from tests.unit.samples import STATUS, typed


def run(*args: str) -> subprocess.CompletedProcess[str]:
    program = [sys.executable, "-m", *args]
    if args[0] == "babbler.daemon.cli":
        program = no_real_links(program)
    return subprocess.run(program, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--interface", ""], "babblerd: --interface: empty interface name pattern"),
        (["--node-id", "12345"], "babblerd: --node-id: node id must be 12 hex digits"),
        (["--hello-interval", "fast"], "babblerd: --hello-interval: expected a number"),
        (
            ["--mode", "never"],
            "babblerd: Invalid value for '--mode': 'never' is not one of 'on-demand', 'always'",
        ),
        (["--moed", "always"], "babblerd: No such option '--moed'"),
    ],
)
def test_bad_flags_exit_2_naming_the_problem_and_touch_nothing(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    run_dir = tmp_path / "run"
    result = run(
        "babbler.daemon.cli",
        "--run-dir",
        str(run_dir),
        "--state-dir",
        str(tmp_path / "s"),
        "--config",
        "/dev/null",
        *flags,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr  # one line, as every error
    assert not run_dir.exists() and not (tmp_path / "s").exists()


def test_bad_config_file_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "b.toml"
    config.write_text('mode = "sometimes"\n')
    result = run("babbler.daemon.cli", "--config", str(config))
    assert result.returncode == 2
    assert f"config {config}: mode: expected one of on-demand, always" in result.stderr


def test_help_explains_every_flag() -> None:
    text = run("babbler.daemon.cli", "--help").stdout
    for flag in (
        "--config",
        "--run-dir",
        "--state-dir",
        "--babeld",
        "--mode",
        "--linger",
        "--interface",
        "--exclude",
        "--node-id",
        "--hello-interval",
        "--log-format",
        "--log-level",
        "--version",
    ):
        assert flag in text


def test_babblerctl_without_a_daemon_says_which_socket_and_fails(tmp_path: Path) -> None:
    path = tmp_path / "babblerd.sock"
    for command in ("status", "dump", "watch", "monitor"):
        result = run("babbler.ctl.main", command, "--socket", str(path))
        assert result.returncode == 1
        assert result.stderr.strip() == (
            f"babblerctl: babblerd is not running (no socket at {path}); "
            "start it: sudo systemctl start babblerd, or sudo babblerd"
        )


def test_render_status_for_people() -> None:
    status = {
        **STATUS,
        "clients": 1,
        "babeld": {**STATUS["babeld"], "pid": 7, "restarts": 2, "last_error": "boom"},
        "keyed": True,
        "unmatched_globs": ["tb*"],
        "routes": [
            {
                "prefix": "fde0::1/128",
                "router_id": "x",
                "metric": 96,
                "refmetric": 0,
                "installed": True,
                "via": "fe80::1",
                "interface": "eth1",
            },
            {
                "prefix": "fde0::1/128",
                "router_id": "x",
                "metric": 300,
                "refmetric": 0,
                "installed": False,
                "via": "fe80::2",
                "interface": "eth2",
            },
        ],
    }
    text = render_status(typed(status))
    assert "node 1a2b3c4d5e6f" in text and "mesh running" in text and "restarts 2" in text
    assert "last error: boom" in text
    assert "eth1  ethernet  up     10G    32    yes    fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1" in text
    assert "address fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0" in text and "keyed" in text
    assert "--interface tb* matches no link" in text
    assert "neighbours: none" in text
    assert "routes: 1 installed, 0 of 0 other nodes reachable (babblerctl status --routes" in text
    assert "fde0::1/128" not in text  # routes are one line unless asked for
    text = render_status(typed(status), routes=True)
    assert "fde0::1/128  96      fe80::1  eth1" in text
    assert "1 more route not installed" in text


def test_sd_notify_sends_one_datagram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sdnotify.notify("READY=1") is False
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert sdnotify.notify("READY=1\nSTATUS=serving")
        assert receiver.recv(100) == b"READY=1\nSTATUS=serving"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind(f"\0babbler-test-{id(receiver)}")
        monkeypatch.setenv("NOTIFY_SOCKET", f"@babbler-test-{id(receiver)}")
        assert sdnotify.notify("STOPPING=1")
        assert receiver.recv(100) == b"STOPPING=1"


def test_every_option_of_every_command_explains_itself() -> None:
    import click

    from babbler.ctl.main import main as babblerctl
    from babbler.daemon.cli_command import main as babblerd
    from babbler.lab.cli import main as lab

    silent = []

    def walk(command: click.Command, path: str) -> None:
        for param in command.params:
            quiet = isinstance(param, click.Option) and not param.help
            if quiet and param.name not in ("help", "version"):
                silent.append(f"{path} --{param.name}")
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}")

    for command, name in ((babblerd, "babblerd"), (babblerctl, "babblerctl"), (lab, "lab")):
        walk(command, name)
    assert silent == []


def test_socket_paths_that_cannot_be_a_socket_are_named(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from babbler.ctl.main import main as babblerctl

    regular = tmp_path / "file"
    regular.write_text("")
    long = tmp_path / ("x" * 120)
    cases = {
        str(regular): f"{regular} is a regular file, not babblerd's socket",
        str(tmp_path): f"{tmp_path} is a directory, not babblerd's socket",
        str(long): "socket path too long",
        str(tmp_path / "absent"): "babblerd is not running (no socket at",
    }
    runner = CliRunner()
    for path, message in cases.items():
        for args, env in (
            (["--socket", path, "status"], {}),  # before the subcommand
            (["status", "--socket", path], {}),  # after it
            (["status"], {"BABBLER_SOCKET": path}),
            ([], {"BABBLER_SOCKET": path}),  # no subcommand: status
        ):
            result = runner.invoke(babblerctl, args, env=env)
            assert result.exit_code == 1, (args, result.output)
            assert message in result.output, (args, result.output)


def test_render_nodes_for_people() -> None:
    from babbler.ui.render import render_nodes

    def node(
        name: str | None, metric: int | None, via: str, reachable: bool = True
    ) -> dict[str, Any]:
        return {
            "node_id": f"{abs(hash(name)) % 10**12:012d}",
            "name": name,
            "node_address": "fde0:20c6:1fa7:ffff::",
            "reachable": reachable,
            "metric": metric,
            "interface": "eth1" if reachable else None,
            "via": via if reachable else None,
            "version": "0.1.0",
            "info": {},
            "info_age_s": 12.4 if name else None,
            "error": None,
        }

    nodes = [
        node("b", 32, "fe80::b"),
        node("c", 64, "fe80::b"),
        node(None, 96, "fe80::b"),
        node("d", None, "", reachable=False),
    ]
    status = {
        "interfaces": [{"name": "eth1", "speed_mbps": 10000}],
        # b is the neighbour at fe80::b: every route via it has b as its next hop
        "neighbours": [{"address": "fe80::b", "interface": "eth1", "node_id": nodes[0]["node_id"]}],
        "nodes": nodes,
    }
    lines = render_nodes(typed(status))
    assert lines[0] == "nodes"
    b, c, unnamed, d = lines[2:]
    assert b.split()[3] == "10.77.98.201"  # its IPv4 node address, from its info
    assert b.split()[5:11] == ["32", "eth1", "10G", "b", "12", "s"]
    assert c.split()[5:11] == ["64", "eth1", "10G", "b", "12", "s"]  # through b, its neighbour
    assert unnamed.split()[0] == "-" and unnamed.split()[-1] == "-"  # no answer yet
    assert "unreachable" in d
    assert render_nodes(typed({"nodes": []})) == ["nodes: no other node known yet"]


def test_bench_usage_errors_name_the_problem_before_connecting(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from babbler.ctl.main import main as babblerctl

    absent = str(tmp_path / "absent")
    cases = {
        (): "give one of NODE, --all or --ring",
        ("n2", "--all"): "give one of NODE, --all or --ring",
        ("n2", "--max-size", "3X"): "Invalid value for --max-size: '3X' is not a size",
        ("n2", "--max-size", "2G"): "Invalid value for --max-size: '2G': from 1K to 1G",
        ("n2", "--duration", "100"): "Invalid value for '--duration'",
    }
    runner = CliRunner()
    for args, message in cases.items():
        result = runner.invoke(babblerctl, ["--socket", absent, "bench", *args])
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    result = runner.invoke(babblerctl, ["--socket", absent, "bench", "n2"])
    assert result.exit_code == 1 and "babblerd is not running" in result.output


def test_usage_errors_are_one_line_listing_the_choices() -> None:
    from click.testing import CliRunner

    from babbler.ctl.main import main as babblerctl

    cases = {
        ("hostfile",): "babblerctl: Missing option '--format'. Choose from: mlx, jaccl, torch,"
        " env, llama-rpc, hosts (see babblerctl hostfile --help)",
        ("hostfile", "--format", "nope"): "babblerctl: Invalid value for '--format': 'nope' is"
        " not one of 'mlx', 'jaccl', 'torch', 'env', 'llama-rpc', 'hosts'",
        ("status", "--bogus"): "babblerctl: No such option '--bogus'",
        ("nosuch",): "babblerctl: No such command 'nosuch' (see babblerctl --help)",
    }
    for args, message in cases.items():
        result = CliRunner().invoke(babblerctl, ["--socket", "/nonexistent", *args])
        assert result.exit_code == 2, (args, result.output)
        assert result.output.startswith(message), (args, result.output)
        assert len(result.output.splitlines()) == 1, (args, result.output)


def test_keygen_makes_the_directory_and_dash_prints_the_key(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from babbler.ctl.main import main as babblerctl

    runner = CliRunner()
    target = tmp_path / "etc" / "babbler" / "mesh.key"  # /etc/babbler on a fresh install
    done = runner.invoke(babblerctl, ["keygen", str(target)])
    assert done.exit_code == 0 and f"(made {target.parent})" in done.output, done.output
    assert (target.stat().st_mode & 0o777, target.parent.stat().st_mode & 0o777) == (0o600, 0o755)
    again = runner.invoke(babblerctl, ["keygen", str(target)])
    assert again.exit_code == 1 and "exists; a key is never overwritten" in again.output
    printed = runner.invoke(babblerctl, ["keygen", "-"])
    assert printed.exit_code == 0 and len(printed.output.strip()) == 64, printed.output
    assert not Path("-").exists()
    blocked = tmp_path / "file"
    blocked.write_text("")
    refused = runner.invoke(babblerctl, ["keygen", str(blocked / "mesh.key")])
    assert refused.exit_code == 1 and refused.output.startswith("babblerctl: cannot write ")
    assert "Errno" not in refused.output, refused.output


def test_every_subcommand_answers_version_and_the_lab_help_names_what_it_takes() -> None:
    from click.testing import CliRunner

    from babbler import __version__
    from babbler.ctl.main import main as babblerctl
    from babbler.lab.cli import main as lab

    runner = CliRunner()
    for group, prog in ((babblerctl, "babblerctl"), (lab, "babbler-lab")):
        for name in group.commands:
            done = runner.invoke(group, [name, "--version"])
            assert done.output.strip() == f"{prog}, version {__version__}", (name, done.output)
    assert "BABBLER_LAB" in runner.invoke(lab, ["--help"]).output
    assert "grid" in runner.invoke(lab, ["up", "--help"]).output
    assert "--name NAME" in runner.invoke(lab, ["status", "--help"]).output


def test_babeld_s_last_error_says_when() -> None:
    from babbler.ui.render import render_status
    from tests.unit.samples import STATUS, typed

    babeld = {**STATUS["babeld"], "last_error": "babeld killed by SIGKILL", "last_error_age_s": 75}
    status = typed({"babeld": babeld})
    assert "last error (75 s ago): babeld killed by SIGKILL" in render_status(status)

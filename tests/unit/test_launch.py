"""What babeld is started with (daemon/babeld/launch.py): its filters let it learn the mesh's
host routes and nothing else, the early start's command line too."""

from __future__ import annotations

from ipaddress import IPv4Network
from pathlib import Path

from babbler.core.config import Config
from babbler.core.platform import LINUX, MACOS
from babbler.daemon.babeld.launch import Launch, launch_for
from babbler.daemon.ipv4 import Ipv4


def filters(args: list[str], kind: str) -> list[str]:
    """The -C lines of one kind (`in`, `redistribute`, `install`), in order."""
    lines = [args[i + 1] for i, word in enumerate(args) if word == "-C"]
    return [line for line in lines if line.split()[0] == kind]


def launch(tmp_path: Path, prefix: IPv4Network | None) -> list[str]:
    config = Config(run_dir=tmp_path / "run", state_dir=tmp_path / "state")
    ipv4 = Ipv4.load(prefix, tmp_path, 0x1A2B3C4D5E6F)
    built = Launch.build(
        config,
        None,
        "02:00:00:00:00:00:00:01",
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0/112",
        "eth1",
        "hello-interval 4",
        tuple(ipv4.babeld_filters()),
    )
    return built.args()


def test_babeld_learns_only_the_meshs_host_routes(tmp_path: Path) -> None:
    args = launch(tmp_path, IPv4Network("10.77.0.0/16"))
    assert filters(args, "in") == [
        "in ip fde0:20c6:1fa7::/48 ge 128 allow",
        "in ip 10.77.0.0/16 ge 32 allow",
        "in deny",
    ]
    assert filters(args, "redistribute")[-1] == "redistribute local deny"
    assert filters(args, "install") == ["install ip 10.77.0.0/16 pref-src 10.77.44.75"]
    assert args[-1] == "eth1"


def test_without_ipv4_babeld_learns_no_ipv4_route(tmp_path: Path) -> None:
    args = launch(tmp_path, None)
    assert filters(args, "in") == ["in ip fde0:20c6:1fa7::/48 ge 128 allow", "in deny"]


def test_held_cable_addresses_are_announced_from_the_loopback_only_where_detours_run(
    tmp_path: Path,
) -> None:
    """A pulled cable's address is held on the loopback and announced (its detour) on Linux;
    never an address on a cable, and nothing of the kind on macOS (no fence there)."""
    ipv4 = Ipv4.load(IPv4Network("10.77.0.0/16"), tmp_path, 0x1A2B3C4D5E6F)
    lines = {}
    for platform in (LINUX, MACOS):
        config = Config(run_dir=tmp_path / "run", state_dir=tmp_path / "state", platform=platform)
        built = launch_for(
            config, None, ipv4, 0x1A2B3C4D5E6F, "02:00:00:00:00:00:00:01", "e1", None
        )
        lines[platform.key] = filters(built.args(), "redistribute")
    assert lines["linux"] == [
        "redistribute local ip fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0/112",
        "redistribute local ip 10.77.0.0/17",
        "redistribute local ip 10.77.128.0/17 if lo",
        "redistribute local deny",
    ]
    assert "redistribute local ip 10.77.128.0/17 if lo" not in lines["macos"]


def test_babelds_default_hellos_are_the_meshs_so_a_lost_request_is_sent_again_soon(
    tmp_path: Path,
) -> None:
    """babeld sends an unanswered seqno request again after half its *default* hello
    interval (at most 2 s), not its links': `-h`/`-H` give it the mesh's, before `-c`."""
    config = Config(run_dir=tmp_path / "run", state_dir=tmp_path / "state", hello_interval=0.1)
    ipv4 = Ipv4.load(None, tmp_path, 0x1A2B3C4D5E6F)
    built = launch_for(config, None, ipv4, 0x1A2B3C4D5E6F, "02:00:00:00:00:00:00:01", "e1", None)
    words = built.args()
    assert words[1:5] == ["-h", "0.1", "-H", "0.1"] and words.index("-c") == 5
    assert "hello-interval 0.1" in " ".join(words)  # each link's own, as before

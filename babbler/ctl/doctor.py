"""The facts `babblerctl doctor` reads on this host (ui/doctor.py judges them): babblerd's
status, the physical links, and the platform's own state. Linux: sysfs, /proc/sys, one
netlink dump of the rules and, while no babblerd answers, of the addresses (the mesh's that
a crashed one left). macOS: `ifconfig`, `networksetup -listallhardwareports`, `ifconfig
bridgeN`, `system_profiler SPThunderboltDataType -json` and the application firewall's
`socketfilterfw`, through `run` so that tests give transcribed outputs. Nothing here needs root
but the state dir; what could not be read is None, and the check says so."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from socket import AF_INET6

from babbler.client import Client
from babbler.client.model import Status
from babbler.core import darwin_output as darwin
from babbler.core import rdma
from babbler.core.addressing import MESH_PREFIX
from babbler.core.errors import BabblerError
from babbler.core.fence import ours
from babbler.core.links import Link
from babbler.core.platform import DEFAULT_STATE_DIR, LINUX, MACOS, PLATFORMS, RUNNING, Platform
from babbler.host import sysfs
from babbler.host.record import FILE as RECORD
from babbler.host.record import LINUX_BOOT, PROC_SYS, read_record
from babbler.ui.doctor import Facts, LinkFacts, LinuxFacts, MacFacts

Run = Callable[[Sequence[str]], str]  # a command's output; raises OSError if it cannot run
SYS_NET = Path("/sys/class/net")
FIREWALL = "/usr/libexec/ApplicationFirewall/socketfilterfw"
STATE_DIR_ENV = "BABBLER_STATE_DIR"  # babbler-lab exec sets it to the node's babblerd's
START_ENV = "BABBLER_START_HINT"  # how to start it, where not as a service (babbler-lab exec)
# RDMA over Thunderbolt's own commands (core/rdma.py); the ports and the profile are read above
RDMA_OWN = ("version_text", "rdma_ctl_text", "devices_text")


def run_command(args: Sequence[str], timeout: float = 20) -> str:
    """Its output; OSError if it cannot run, fails silent, or hangs past `timeout`."""
    try:
        done = subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise OSError(f"{args[0]} did not finish within {timeout:g} s") from None
    if done.returncode != 0 and not done.stdout:
        raise OSError(done.stderr.strip() or f"{args[0]} exited {done.returncode}")
    return done.stdout + done.stderr  # babeld -V writes to stderr


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def status_of(socket: Path) -> tuple[Status | None, str | None]:
    try:
        return Client(socket).status(), None
    except (BabblerError, OSError) as error:
        return None, str(error)


def babeld_version(run: Run) -> str | None:
    if shutil.which("babeld") is None:
        return None
    try:
        return run(["babeld", "-V"]).strip().removeprefix("babeld-") or "(unknown version)"
    except OSError:
        return "(unknown version)"


def leftovers(state_dir: Path) -> list[str] | None:
    """Settings a babblerd recorded and did not put back; None when the state dir cannot be
    read (it is root's, 0700)."""
    try:
        record = read_record(state_dir, _read(PROC_SYS / LINUX_BOOT) or "")
    except OSError:
        return None
    return sorted(name.replace("/", ".") for name in record)


# -- Linux ------------------------------------------------------------------------------------


def linux_links(links: dict[str, Link], mesh: set[str]) -> tuple[LinkFacts, ...]:
    """The physical wired links, and any other babblerd uses (`--interface` may name them)."""
    out = []
    for link in sorted(links.values(), key=lambda x: x.name):
        if link.name not in mesh and (not link.is_physical or link.wireless):
            continue
        carrier = _read(SYS_NET / link.name / "carrier")
        mtu = _read(SYS_NET / link.name / "mtu")
        out.append(
            LinkFacts(
                name=link.name,
                up=link.up,
                carrier=None if carrier is None else carrier == "1",
                link_local=link.link_local,
                mtu=int(mtu) if mtu and mtu.isdigit() else None,
                speed_mbps=link.speed_mbps,
                thunderbolt=link.is_thunderbolt,
            )
        )
    return tuple(out)


def mesh_addresses() -> tuple[tuple[str, str], ...] | None:
    """The addresses of the mesh's prefix on this host's links, as (link, address/length);
    None if netlink cannot be read. With no babblerd running, a crashed one left them."""
    try:
        from pyroute2 import IPRoute

        with IPRoute() as ip:
            names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ip.get_links()}
            found = ip.get_addr(family=AF_INET6)
    except Exception:  # pyroute2 raises its own kinds too: the check says nothing then
        return None
    out = []
    for entry in found:
        address = entry.get_attr("IFA_ADDRESS")
        if address and ipaddress.IPv6Address(address) in MESH_PREFIX:
            link = str(names.get(entry["index"], entry["index"]))
            out.append((link, f"{address}/{entry['prefixlen']}"))
    return tuple(sorted(out))


def babbler_rules() -> int | None:
    """How many of babblerd's rules the kernel holds (both families)."""
    try:
        from pyroute2 import IPRoute

        with IPRoute() as ip:
            found = ip.get_rules()
    except Exception:  # pyroute2 raises its own kinds too: the check says "could not read"
        return None
    return sum(1 for r in found if ours(r.get_attr("FRA_PROTOCOL"), r.get_attr("FRA_PRIORITY")))


def linux_facts(links: dict[str, Link], mesh: set[str]) -> LinuxFacts:
    names = ("net.ipv6.conf.all.forwarding", "net.ipv4.ip_forward")
    sysctls = {n: _read(PROC_SYS / n.replace(".", "/")) for n in names}
    others = [n for n, link in links.items() if n not in mesh and not link.is_loopback]
    accept_ra = {
        n: value
        for n in [*sorted(others), "default"]
        if (value := _read(PROC_SYS / f"net/ipv6/conf/{n}/accept_ra")) is not None
    }
    bus = Path("/sys/bus/thunderbolt/devices")
    controller = bus.is_dir() and any(bus.iterdir())
    return LinuxFacts(
        sysctls=sysctls,
        accept_ra=accept_ra,
        rules=babbler_rules(),
        thunderbolt_controller=controller,
        thunderbolt_net=Path("/sys/module/thunderbolt_net").exists(),
    )


# -- macOS ------------------------------------------------------------------------------------


def _try(run: Run, args: Sequence[str]) -> str | None:
    try:
        return run(args)
    except OSError:
        return None


def mac_facts(run: Run) -> tuple[tuple[LinkFacts, ...], MacFacts]:
    ports_text = _try(run, ["networksetup", "-listallhardwareports"])
    ports = darwin.hardware_ports(ports_text or "")
    states = darwin.ifconfig_states(_try(run, ["ifconfig"]) or "")
    links = []
    for name, state in sorted(states.items()):
        port = ports.get(name)
        if not name.startswith("en") or not darwin.is_wired_port(port):
            continue
        links.append(
            LinkFacts(
                name=name,
                up=state.up,
                carrier=state.active,
                link_local=state.link_local,
                mtu=state.mtu,
                speed_mbps=state.speed_mbps,
                thunderbolt=darwin.is_thunderbolt_port(port),
                port=port,
            )
        )
    bridges = {
        name: darwin.bridge_members(_try(run, ["ifconfig", name]) or "")
        for name in states
        if name.startswith("bridge")
    }
    profile = _try(run, ["system_profiler", "SPThunderboltDataType", "-json"])
    global_state = _try(run, [FIREWALL, "--getglobalstate"])
    block_all = _try(run, [FIREWALL, "--getblockall"]) or ""
    thunderbolt = {d for d, port in ports.items() if darwin.is_thunderbolt_port(port)}
    said = {name: _try(run, args) for name, args in rdma.COMMANDS.items() if name in RDMA_OWN}
    return tuple(links), MacFacts(
        bridges=bridges,
        thunderbolt=thunderbolt,
        cabled_ports=darwin.thunderbolt_cables(profile, ports) if profile is not None else None,
        firewall=darwin.firewall_state(global_state, block_all) if global_state else None,
        rdma=rdma.read(**said, profile_json=profile, ports_text=ports_text),
    )


def gather(
    socket: Path,
    run: Run = run_command,
    state_dir: Path = DEFAULT_STATE_DIR,
    platform: Platform | None = None,
) -> Facts:
    """The facts on this host, checked as `platform` (None: the one babblerd acts as, else
    the running system's). The state dir left at its default is $BABBLER_STATE_DIR when
    set, and how to start babblerd $BABBLER_START_HINT (`babbler-lab exec` sets both)."""
    status, error = status_of(socket)
    if error and os.environ.get(START_ENV):  # "babblerd is not running (...); start it: ..."
        error = f"{error.partition('; ')[0]}; {os.environ[START_ENV]}"
    if state_dir == DEFAULT_STATE_DIR and os.environ.get(STATE_DIR_ENV):
        state_dir = Path(os.environ[STATE_DIR_ENV])
    if platform is None:
        told = PLATFORMS.get(status.platform or "") if status is not None else None
        platform = told or RUNNING or LINUX
    left = leftovers(state_dir) if status is None else []
    base = Facts(
        platform=platform.name,
        root=os.geteuid() == 0,
        socket=str(socket),
        status=status,
        status_error=error,
        babeld_version=babeld_version(run) if status is None else None,
        leftovers=left,
        record=str(state_dir / RECORD) if left else None,
        not_read=() if left is not None else ("settings left by a crashed babblerd",),
    )
    if platform is MACOS:
        links, mac = mac_facts(run)
        return replace(base, links=links, mac=mac)
    found = sysfs.read_links()
    mesh = {i.name for i in status.interfaces} if status else set()
    return replace(
        base,
        links=linux_links(found, mesh),
        linux=linux_facts(found, mesh),
        stale_addresses=mesh_addresses() if status is None else None,
    )

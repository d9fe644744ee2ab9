"""The platform babblerd acts as, one value: Linux or macOS, and everything that differs
between the two (babeld's options, the fence, the early start, default paths, labels).

Chosen once: the `platform` setting, which defaults to the running system (`RUNNING`, the one
read of `sys.platform` for the platform; host/system.py reads it for facts about the host the
process runs on). The lab sets `--platform macos` to run the macOS code path in Linux network
namespaces (docs/design.md, "Platform and host"). Pure: a table of facts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Platform:
    key: str  # the setting's value and status.platform: "linux" or "macos"
    name: str  # shown to people
    run_dir: Path  # the default public socket directory
    state_dir: Path  # the default state directory
    # babeld's kernel backend routes IPv4 over IPv6 next hops (v4-via-v6): Linux's (>= 5.13)
    # does; its BSD one has none, and there the cable /31s are babeld's IPv4 next hops.
    babeld_v4_via_v6: bool
    babeld_export_table: bool  # babeld installs into table 96, which the fence looks up
    fence: bool  # policy-routing rules (core/fence.py): Linux has them, macOS none
    # A pulled cable's addresses held on the loopback and announced, so its connections
    # take a detour through the mesh (DESIGN.md "IPv4"). Needs the fence: with babeld's
    # routes in the main table (macOS) a /32 would beat the cable's own /31 while plugged.
    cable_detours: bool
    per_link_settings: bool  # /proc/sys per link, or macOS's global sysctl(8) names
    early_start: bool  # babeld spawned before the heavy imports (sysfs, the death signal)
    # Children get SIGKILL when babblerd dies (PR_SET_PDEATHSIG). macOS cannot: there babeld
    # outlives a `kill -9` of babblerd, and the next start finds it.
    children_die_with_babblerd: bool
    # The label of the IPv4 node address on the loopback, for programs that bind by
    # interface name (torch's GLOO_SOCKET_IFNAME); None where addresses have no labels.
    node_address_label: str | None
    start_hint: str  # how an error says to start babblerd (docs/operations.md)
    # The command that names the route to an address (`babblerctl doctor --probe`): the
    # address is its last argument.
    route_get: tuple[str, ...] = ("ip", "route", "get")
    # How each link's byte and packet counters are read (daemon/counters.py): None from
    # sysfs (/sys/class/net/IF/statistics: a few file reads), else this command's output
    # (macOS has no such files: `netstat -ibn`, read by core/darwin_output.py).
    counters_command: tuple[str, ...] | None = None


SOCKET_NAME = "babblerd.sock"  # the public socket, in the run directory
# Linux: the label of the IPv4 node address on `lo`, the one interface name that holds it
# and nothing else, for programs that bind by interface name (torch's gloo:
# GLOO_SOCKET_IFNAME=lo:babbler; `lo` alone gives them 127.0.0.1). docs/jobs.md.
NODE_ADDRESS_LABEL = "lo:babbler"
CABLE_LABEL = ":m"  # the tail of a cable address's label (cable_address_label)
IFNAMSIZ = 16  # Linux's limit on interface names and labels, the terminating NUL included

LINUX = Platform(
    key="linux",
    name="Linux",
    run_dir=Path("/run/babbler"),
    state_dir=Path("/var/lib/babbler"),
    babeld_v4_via_v6=True,
    babeld_export_table=True,
    fence=True,
    cable_detours=True,
    per_link_settings=True,
    early_start=True,
    children_die_with_babblerd=True,
    node_address_label=NODE_ADDRESS_LABEL,
    start_hint="start it: sudo systemctl start babblerd, or sudo babblerd",
)
MACOS = Platform(
    key="macos",
    name="macOS",
    run_dir=Path("/var/run/babbler"),
    state_dir=Path("/var/db/babbler"),
    babeld_v4_via_v6=False,
    babeld_export_table=False,
    fence=False,
    cable_detours=False,
    per_link_settings=False,
    early_start=False,
    children_die_with_babblerd=False,
    node_address_label=None,
    start_hint=(
        "start it: sudo launchctl bootstrap system"
        " /Library/LaunchDaemons/org.babbler.babblerd.plist, or sudo babblerd"
    ),
    route_get=("route", "-n", "get"),
    counters_command=("netstat", "-ibn"),
)
PLATFORMS = {platform.key: platform for platform in (LINUX, MACOS)}


def of_system(system: str) -> Platform | None:
    """The platform of a `sys.platform` value, None for a system babbler does not run on."""
    if system.startswith("linux"):
        return LINUX
    return MACOS if system == "darwin" else None


RUNNING = of_system(sys.platform)  # the running system's platform, None: unsupported
SYSTEM_NAME = RUNNING.name if RUNNING is not None else sys.platform
DEFAULT = RUNNING or LINUX  # defaults (paths, the setting) where the system is unsupported
DEFAULT_RUN_DIR = DEFAULT.run_dir
DEFAULT_STATE_DIR = DEFAULT.state_dir


def cable_address_label(interface: str) -> str:
    """Linux: the label of a cable's IPv4 address on its link, never the link's own name.
    babeld reads a link's IPv4 address with SIOCGIFADDR, which takes the first address
    labelled with the link's name, and when that changes it flushes every route it learned
    over the link, IPv6 too. A cable address comes after the neighbour, so each one made
    such a flush as the mesh formed; the seqno requests that followed left babeld's
    forwarded-request records behind, which swallow the same request for 65 s
    (REQUEST_TIMEOUT): after a node died, the nodes beside it reached the far side of the
    ring only 64 s later in 1 of 5 runs (docs/benchmarks.md). Unlabelled for babeld, it
    announces IPv4 routes via IPv6 next hops (v4-via-v6), as it did before the address."""
    return f"{interface[: IFNAMSIZ - 1 - len(CABLE_LABEL)]}{CABLE_LABEL}"

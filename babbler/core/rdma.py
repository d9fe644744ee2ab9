"""RDMA over Thunderbolt on a Mac, read and judged (pure): whether MLX's jaccl backend can
run there, and if not, why and what to do.

A Mac is ready when (Apple's TN3205; exo #1813, #2186; mlx #3777):
- macOS is 26.2 or later (`sw_vers -productVersion`): RDMA over Thunderbolt came with 26.2;
- `rdma_ctl status` says `enabled` (it is turned on only from macOS Recovery: `rdma_ctl
  enable` there, then a reboot);
- each Thunderbolt cable (a port with another Mac at its far end: `system_profiler
  SPThunderboltDataType -json`) has its RDMA device, `rdma_<port>` in `ibv_devices` (an
  enabled Mac can list none: "RDMA enabled but no devices", mlx #3777);
- each such cable runs at Thunderbolt 5's speed (80 Gb/s or more; Thunderbolt 4 links at
  40 Gb/s and has no RDMA, though macOS may list a device for it: exo #1813, #1636);
- it has at least one such cable.

`read` makes the value babblerd puts in `status.rdma` and node info `rdma` from the commands'
outputs; `problems` judges any such value (this node's, or one another node sent, already
checked by daemon/nodes/checked.py), and `ready` is "no problem".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from babbler.core import darwin_output as darwin

MINIMUM_MACOS = (26, 2)  # TN3205: "available starting with macOS 26.2"
THUNDERBOLT5_GBPS = 80  # a Thunderbolt 5 link; Thunderbolt 4 (and USB4 at its speed) is 40
# The commands babblerd runs for it, each a read (nothing here changes the Mac), by the
# argument of `read` that takes each one's output
COMMANDS = {
    "version_text": ("sw_vers", "-productVersion"),
    "rdma_ctl_text": ("rdma_ctl", "status"),
    "devices_text": ("ibv_devices",),
    "profile_json": ("system_profiler", "SPThunderboltDataType", "-json"),
    "ports_text": ("networksetup", "-listallhardwareports"),
}
VERSION = re.compile(r"^\d{1,3}(?:\.\d{1,3}){0,2}$")
SPEED = re.compile(r"^(\d{1,4}(?:\.\d+)?) Gb/s$")  # a live link; an idle port says "Up to ..."
DEVICE = re.compile(r"^rdma_[A-Za-z0-9_.-]{1,15}$")


def macos_version(text: str | None) -> str | None:
    """`sw_vers -productVersion` (`26.2`) -> the version, None if it says no version."""
    words = (text or "").split()
    return words[0] if len(words) == 1 and VERSION.match(words[0]) else None


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def rdma_ctl_state(text: str | None) -> str | None:
    """`rdma_ctl status` -> `enabled` or `disabled` (the one word it prints); None otherwise."""
    word = (text or "").strip().lower()
    return word if word in ("enabled", "disabled") else None


def rdma_devices(text: str | None) -> list[str]:
    """`ibv_devices` -> the RDMA over Thunderbolt devices (`rdma_en2`), as mlx's
    distributed_config reads them: every word of the output that starts with `rdma_`."""
    return sorted({word for word in (text or "").split() if DEVICE.match(word)})


@dataclass(frozen=True)
class Port:
    """A Thunderbolt port with another Mac at its far end."""

    interface: str  # en2
    speed_gbps: float | None  # the link's speed (`80 Gb/s`); None: it does not say


def thunderbolt_ports(profile_json: str | None, ports_text: str | None) -> list[Port]:
    """`system_profiler SPThunderboltDataType -json` with `networksetup
    -listallhardwareports` -> the ports cabled to another Mac, with their link speed."""
    ports = darwin.hardware_ports(ports_text or "")
    cabled = darwin.thunderbolt_cables(profile_json or "", ports)
    try:
        buses = json.loads(profile_json or "").get("SPThunderboltDataType", [])
    except (ValueError, AttributeError):
        buses = []
    by_port = {port: device for device, port in ports.items()}
    speeds: dict[str, float | None] = {}
    for bus in buses if isinstance(buses, list) else []:
        receptacle = bus.get("receptacle_1_tag") if isinstance(bus, dict) else None
        if not isinstance(receptacle, dict):
            continue
        device = by_port.get(f"Thunderbolt {receptacle.get('receptacle_id_key')}")
        found = SPEED.match(str(receptacle.get("current_speed_key", "")))
        if device is not None:
            speeds[device] = float(found.group(1)) if found else None
    return [Port(name, speeds.get(name)) for name, yes in sorted(cabled.items()) if yes]


def generation(speed_gbps: float | None) -> int | None:
    """Thunderbolt 5 or 4 by link speed (None: not said)."""
    if speed_gbps is None:
        return None
    return 5 if speed_gbps >= THUNDERBOLT5_GBPS else 4


def read(
    version_text: str | None,
    rdma_ctl_text: str | None,
    devices_text: str | None,
    profile_json: str | None,
    ports_text: str | None,
) -> dict[str, Any]:
    """The commands' outputs (None: it could not run) -> `status.rdma`."""
    devices = rdma_devices(devices_text)
    cables = [
        {
            "interface": port.interface,
            "speed_gbps": port.speed_gbps,
            "thunderbolt": generation(port.speed_gbps),
            "device": f"rdma_{port.interface}" if f"rdma_{port.interface}" in devices else None,
        }
        for port in thunderbolt_ports(profile_json, ports_text)
    ]
    value: dict[str, Any] = {
        "ready": False,
        "macos": macos_version(version_text),
        "rdma_ctl": rdma_ctl_state(rdma_ctl_text),
        "devices": devices,
        "cables": cables,
    }
    value["ready"] = not problems(value)
    return value


@dataclass(frozen=True)
class Problem:
    what: str  # what is wrong, one line
    do: str  # what to run or change on that Mac


RECOVERY = (
    "in macOS Recovery (hold the power button at start-up, Options, Utilities > Terminal): "
    "rdma_ctl enable, then restart"
)


def problems(rdma: dict[str, Any]) -> list[Problem]:
    """Why jaccl cannot run on the Mac this value describes, worst first (none: ready)."""
    out: list[Problem] = []
    version = rdma.get("macos")
    old = version is not None and version_tuple(version) < MINIMUM_MACOS
    if version is None:
        out.append(Problem("its macOS version is not known", "check sw_vers -productVersion"))
    elif old:
        out.append(
            Problem(
                f"macOS {version}: RDMA over Thunderbolt needs 26.2 or later",
                "update macOS (System Settings > General > Software Update)",
            )
        )
    state = rdma.get("rdma_ctl")
    if state != "enabled" and not old:  # before 26.2 there is no rdma_ctl to run
        said = "disabled" if state == "disabled" else "not known (no rdma_ctl answer)"
        out.append(Problem(f"rdma_ctl status: {said}", RECOVERY))
    cables = rdma.get("cables") or []
    if not cables:
        out.append(
            Problem(
                "no Thunderbolt cable to another Mac",
                "cable it to the other Macs with Thunderbolt 5 cables",
            )
        )
    unread = [c["interface"] for c in cables if c.get("speed_gbps") is None]
    if unread:
        out.append(
            Problem(
                f"no link speed given for {', '.join(unread)} (system_profiler"
                " SPThunderboltDataType): Thunderbolt 4 or 5 is not known",
                "check the cable's speed in System Information > Thunderbolt/USB4:"
                " RDMA needs 80 Gb/s (Thunderbolt 5)",
            )
        )
    slow = [c for c in cables if c.get("thunderbolt") != 5 and c.get("speed_gbps") is not None]
    if slow:
        said = ", ".join(f"{c['interface']} at {c['speed_gbps']:g} Gb/s" for c in slow)
        out.append(
            Problem(
                f"{said}: RDMA needs Thunderbolt 5 (80 Gb/s); this is Thunderbolt 4 or less",
                "use a Thunderbolt 5 cable between Thunderbolt 5 ports of both Macs "
                "(M4 Pro/Max or later)",
            )
        )
    if state == "enabled":
        bare = [c["interface"] for c in cables if c.get("device") is None]
        if bare:
            out.append(
                Problem(
                    f"no RDMA device for {', '.join(bare)} (ibv_devices lists "
                    f"{', '.join(rdma.get('devices') or []) or 'none'})",
                    "restart this Mac with the cables in; if still none, "
                    + RECOVERY.replace("rdma_ctl enable, then restart", "rdma_ctl enable again"),
                )
            )
    return out


def ready(rdma: object) -> bool | None:
    """`status.rdma` or a node's `rdma` -> ready, not, or None (not a Mac, or not read)."""
    if not isinstance(rdma, dict) or not isinstance(rdma.get("ready"), bool):
        return None
    return bool(rdma["ready"])

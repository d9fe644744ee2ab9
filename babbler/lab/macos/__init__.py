"""The macOS lab: Linux network namespaces whose commands act on the namespace as macOS's act
on a Mac and print what macOS prints, so that babblerd's macOS code path (`--platform
macos`) runs end to end against real babeld and real traffic (docs/macos.md).

Modules: `output` (pure: ifconfig, netstat, networksetup, system_profiler, sysctl and
socketfilterfw texts from a snapshot), `commands` (pure: the allow-list: one command line in,
a text or an act out, anything else refused), `server` (one small server per node, in its
namespace: snapshots from netlink, acts through netlink and /proc/sys), `shims` (the commands
on the node's PATH: a few lines of bash that ask the server, no Python start-up each).
"""

"""The first minute after a whole mesh starts, side by side with babeld alone (issue 33).

"The first minute as cheap as the rest": what babbler costs from the moment every node
routes to every other, window by window, and where babblerd's CPU goes.

For each size, on a ring (or grid) of fresh namespaces each time: babeld alone at babbler's
hello interval (`babeld-same-hello`, the reference), then babbler (`babbler`). Each mode
starts the whole mesh; t0 is the moment every node routes to every other and every pair
pings (meshes.wait_reachable). Reported:

- seconds from the first start to t0, and the CPU the mesh used until t0 (seconds, summed
  over the nodes: every babeld alone; every babblerd, its babeld and its bench responder,
  and what babblerd reaped: a babeld restarted, a responder started again);
- from t0, WINDOWS back-to-back windows of WINDOW seconds, then one more (`steady`) STEADY
  seconds after the last: CPU summed over the mesh, % of one core, of every babblerd, every
  babeld under babbler, every bench responder and every babeld alone (the reference run's
  window of the same index). Each window reads every process's CPU counters at its two
  edges (/proc/PID/stat), all processes at the same edges. Per window the ratio
  babblerd / babeld alone and (babblerd + its babeld) / babeld alone;
- per node per window, the change of every `info_*` counter of babblerd's `stats` (node
  info asks, answers, pushes), read at the window edges; none when babblerd has none;
- `--profile`: py-spy (`--rate 50 --nonblocking --format raw`) on every babblerd (or the
  first `--profile-nodes`), one per pid, all started together: through the first WINDOWS x
  WINDOW seconds from t0, and again through the steady window. Each sample is classified
  by its source of work (bench/profile_sources.py: node info asks, answers, book; IPv4;
  host care; cable reconciles; babeld lines; client requests; imports; the rest), per phase
  the share of babblerd's samples per source and its approximate CPU (samples / (rate x
  seconds), % of one core per node), and the innermost babbler functions most seen. The
  CPU windows are measured as well, beside py-spy, which then shares the cores: take the
  ratios from a run without `--profile`. py-spy's own CPU (what the bench reaped) is printed.

    sudo .venv/bin/python bench/first_minute.py [--sizes 12 32] [--topology ring|grid]
        [--hello 0.1] [--windows 6] [--window 10] [--steady 30] [--limit 300] [--profile]

The goal (issue 33): in every 10 s window of the first minute, babblerd summed over the mesh
at most 1.5 times babeld alone, at 12 and 32 nodes. Results (JSON) are written after every
size, so a long run that fails later keeps what it measured.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common
import profile_sources
from meshes import BABBLER_MODES, Mesh, wait_reachable

from babbler.client import ask
from babbler.core.config import DEFAULT_HELLO_INTERVAL
from babbler.daemon.spawn import process_name
from babbler.lab import Lab, Node
from babbler.lab.processes import RESPONDER, pids_in

REFERENCE = "babeld-same-hello"
ROLES = ("babblerd", "babeld", "responder")
RATE = 50  # py-spy samples a second (--rate): at 50, a quiet 12-ring gives ~20 in 10 s
PYSPY = Path(sys.executable).parent / "py-spy"
STATS_TIMEOUT = 2.0  # seconds for one node's `stats` at a window edge
TOP = 10  # innermost functions printed per phase


def role(pid: int) -> str | None:
    """babblerd, its bench responder or babeld (alone or babblerd's), by its command line."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    if "babbler.daemon.cli" in cmdline:
        return "babblerd"
    if RESPONDER in cmdline:
        return "responder"
    return "babeld" if process_name(pid) == "babeld" else None


def processes(lab: Lab) -> dict[str, list[int]]:
    """The pids of each role running in the lab's namespaces."""
    found: dict[str, list[int]] = {name: [] for name in ROLES}
    for node in lab.nodes:
        for pid in pids_in(node.netns):
            name = role(pid)
            if name is not None:
                found[name].append(pid)
    return found


def cpu_seconds(pid: int, reaped: bool = False) -> float | None:
    """CPU seconds a process used so far, all its threads (utime + stime), or with `reaped`
    its children that it reaped (cutime + cstime); None when it is gone. /proc/PID/stat
    alone: common.counters also reads each thread's status, and a thread that ends
    meanwhile (trio's idle worker threads do) would fail the read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    first = 13 if reaped else 11
    return (int(fields[first]) + int(fields[first + 1])) / common.TICKS


def info_counters(node: Node) -> dict[str, int]:
    """The `info_*` counters of a node's `stats` ({} when it has none or does not answer)."""
    try:
        stats = ask(node.socket, "stats", timeout=STATS_TIMEOUT)
    except Exception:  # an overloaded node: this edge has no counters for it
        return {}
    return {k: v for k, v in stats.items() if k.startswith("info_") and isinstance(v, int)}


@dataclass
class Edge:
    at: float  # time.monotonic()
    cpu: dict[int, float]  # pid -> CPU seconds so far (a pid gone is missing)
    info: dict[str, dict[str, int]]  # node name -> its info_* counters


def edge(pids: Sequence[int], nodes: Sequence[Node]) -> Edge:
    """Every process's CPU counters at one moment (then every node's `stats`)."""
    at, read = time.monotonic(), {pid: cpu_seconds(pid) for pid in pids}
    cpu = {pid: seconds for pid, seconds in read.items() if seconds is not None}
    return Edge(at, cpu, {n.name: info_counters(n) for n in nodes})


def window(a: Edge, b: Edge, roles: dict[str, list[int]], t0: float) -> dict[str, Any]:
    seconds = b.at - a.at
    both = a.cpu.keys() & b.cpu.keys()
    cpu = {
        name: 100 * sum(b.cpu[p] - a.cpu[p] for p in pids if p in both) / seconds
        for name, pids in roles.items()
    }
    info = {
        node: {k: v - a.info.get(node, {}).get(k, 0) for k, v in after.items()}
        for node, after in b.info.items()
        if after and a.info.get(node)
    }
    return {
        "from_s": a.at - t0,
        "to_s": b.at - t0,
        "seconds": seconds,
        "cpu_percent": cpu,
        "gone": len(a.cpu) - len(both),  # processes that ended (or restarted) meanwhile
        "info": info,
    }


class Profiler:
    """py-spy on each pid, all started together for `seconds`; `finish` waits for them and
    classifies what they sampled."""

    def __init__(
        self, pids: Sequence[int], seconds: int, folder: Path, phase: str, rate: int = RATE
    ) -> None:
        self.seconds = seconds
        self.rate = rate
        self.usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.started = time.monotonic()
        self.spies: list[tuple[int, Path, subprocess.Popen[bytes]]] = []
        for pid in pids:
            out = folder / f"{phase}-{pid}.txt"
            log = (folder / f"{phase}-{pid}.log").open("wb")
            command = [
                str(PYSPY), "record", "--pid", str(pid), "--rate", str(rate), "--nonblocking",
                "--format", "raw", "--output", str(out), "--duration", str(seconds),
            ]  # fmt: skip
            spy = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            self.spies.append((pid, out, spy))

    def finish(self) -> dict[str, Any]:
        lines: list[str] = []
        failed = []
        for pid, out, spy in self.spies:
            try:
                code = spy.wait(self.seconds + 60)
            except subprocess.TimeoutExpired:
                spy.kill()
                code = spy.wait()
            if code != 0 or not out.exists():
                said = out.with_suffix(".log").read_text(errors="replace").strip().splitlines()
                failed.append({"pid": pid, "exit": code, "said": said[-1] if said else ""})
                continue
            lines += out.read_text(errors="replace").splitlines()
        took = time.monotonic() - self.started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = usage.ru_utime + usage.ru_stime - self.usage.ru_utime - self.usage.ru_stime
        counts = profile_sources.by_source(lines)
        samples = sum(counts.values())
        profiled = len(self.spies) - len(failed)
        per_node = self.rate * self.seconds * max(profiled, 1) / 100  # samples that are 1 % a node
        return {
            "seconds": self.seconds,
            "rate": self.rate,
            "pids": profiled,
            "failed": failed,
            "samples": samples,
            "by_source": counts,
            "share_percent": {k: 100 * v / max(samples, 1) for k, v in counts.items()},
            "core_percent_per_node": {k: v / per_node for k, v in counts.items()},
            "top": profile_sources.innermost(lines).most_common(3 * TOP),
            "pyspy_cpu_percent": 100 * spent / took,  # all the py-spys, % of one core
        }


def follow(
    lab: Lab, roles: dict[str, list[int]], t0: float, args: argparse.Namespace, folder: Path | None
) -> dict[str, Any]:
    """The windows from t0 and the steady one, profiled with `folder` (babbler only)."""
    pids = [p for name in ROLES for p in roles[name]]
    nodes = lab.nodes if roles["babblerd"] else []
    spied = roles["babblerd"][: args.profile_nodes] if folder is not None else []
    first = max(1, round(args.windows * args.window))
    edges = [edge(pids, nodes)]
    profiler = Profiler(spied, first, folder, "first", args.rate) if folder and spied else None
    for k in range(1, args.windows + 1):
        time.sleep(max(0.0, edges[0].at + k * args.window - time.monotonic()))
        edges.append(edge(pids, nodes))
    result: dict[str, Any] = {
        "windows": [window(a, b, roles, t0) for a, b in itertools.pairwise(edges)]
    }
    if profiler is not None:
        result["profile_first"] = profiler.finish()
    time.sleep(max(0.0, edges[-1].at + args.steady - time.monotonic()))
    start = edge(pids, nodes)
    steady = max(1, round(args.window))
    profiler = Profiler(spied, steady, folder, "steady", args.rate) if folder and spied else None
    time.sleep(max(0.0, start.at + args.window - time.monotonic()))
    result["steady"] = window(start, edge(pids, nodes), roles, t0)
    if profiler is not None:
        result["profile_steady"] = profiler.finish()
    return result


def run(size: int, mode: str, args: argparse.Namespace, folder: Path | None) -> dict[str, Any]:
    daemon_args = ["--mode", "always", "--hello-interval", f"{args.hello:g}"]
    name = f"fm{os.getpid() % 1000}{'r' if mode == REFERENCE else 'b'}{size}"
    lab = Lab.create(name, size, args.topology, daemon_args)
    mesh = Mesh(lab, mode, hello=args.hello)
    result: dict[str, Any] = {"mode": mode}
    try:
        started = time.monotonic()
        mesh.start_all()
        for node in lab.nodes:
            mesh.ready(node)
        try:
            result["reachable_s"] = wait_reachable(lab, mesh, lab.nodes, started, args.limit)
        except TimeoutError as error:
            result["error"] = str(error)
            return result
        t0 = started + result["reachable_s"]
        roles = processes(lab)
        result["processes"] = {k: len(v) for k, v in roles.items()}
        to_t0 = {k: sum(cpu_seconds(p) or 0.0 for p in v) for k, v in roles.items()}
        to_t0["reaped by babblerd"] = sum(
            cpu_seconds(p, reaped=True) or 0.0 for p in roles["babblerd"]
        )
        result["cpu_s_to_t0"] = to_t0
        result.update(follow(lab, roles, t0, args, folder if mode != REFERENCE else None))
        return result
    finally:
        mesh.stop()
        lab.down()


def ratios(reference: dict[str, Any], babbler: dict[str, Any]) -> list[dict[str, Any]]:
    """Per window (the steady one last): babblerd / babeld alone, (babblerd + its babeld) /
    babeld alone, summed over the mesh."""
    if "error" in reference or "error" in babbler:
        return []
    out = []
    pairs = zip(
        [*reference["windows"], reference["steady"]],
        [*babbler["windows"], babbler["steady"]],
        strict=True,
    )
    for n, (ref, ours) in enumerate(pairs):
        alone = max(ref["cpu_percent"]["babeld"], 0.01)
        cpu = ours["cpu_percent"]
        out.append(
            {
                "window": label(ours, steady=n == len(reference["windows"])),
                "babblerd_over_babeld_alone": cpu["babblerd"] / alone,
                "with_its_babeld_over_babeld_alone": (cpu["babblerd"] + cpu["babeld"]) / alone,
            }
        )
    return out


def label(window: dict[str, Any], steady: bool = False) -> str:
    span = f"{window['from_s']:.0f}-{window['to_s']:.0f}"
    return f"steady {span}" if steady else span


def report(size: int, args: argparse.Namespace, ref: dict[str, Any], bab: dict[str, Any]) -> None:
    where = f"{args.topology} of {size}, hello {args.hello:g} s"
    starts = []
    for result in (ref, bab):
        if "error" in result:
            starts.append([result["mode"], result["error"], "", "", "", ""])
            continue
        cpu = result["cpu_s_to_t0"]
        starts.append(
            [
                result["mode"],
                result["reachable_s"],
                cpu["babeld"],
                cpu["babblerd"],
                cpu["responder"],
                cpu["reaped by babblerd"],
            ]
        )
    header = ["mode", "s to t0", "babeld CPU s", "babblerd CPU s", "responders CPU s", "reaped"]
    print(common.table(f"\nTo t0 (every node routes to every other), {where}", header, starts))
    if "error" in ref or "error" in bab:
        return
    rows = []
    together = [*zip(ref["windows"], bab["windows"], strict=True), (ref["steady"], bab["steady"])]
    for (r, b), ratio in zip(together, ratios(ref, bab), strict=True):
        cpu = b["cpu_percent"]
        rows.append(
            [
                ratio["window"],
                r["cpu_percent"]["babeld"],
                cpu["babblerd"],
                cpu["babeld"],
                cpu["responder"],
                ratio["babblerd_over_babeld_alone"],
                ratio["with_its_babeld_over_babeld_alone"],
                cpu["babblerd"] / size,
                f"{r['gone']}/{b['gone']}",
            ]
        )
    header = [
        "s from t0", "babeld alone", "babblerd", "its babeld", "responders",
        "babblerd/alone", "(babblerd+babeld)/alone", "babblerd per node", "gone",
    ]  # fmt: skip
    title = f"\nCPU summed over the mesh, % of one core, {where}"
    print(common.table(title, header, rows))
    worst = max(ratios(ref, bab)[: args.windows], key=lambda r: r["babblerd_over_babeld_alone"])
    verdict = "met" if worst["babblerd_over_babeld_alone"] <= 1.5 else "not met"
    print(
        f"goal (issue 33), babblerd <= 1.5 x babeld alone in every window: {verdict} "
        f"(worst {worst['babblerd_over_babeld_alone']:.2f} in {worst['window']} s)"
    )
    report_info(size, bab)
    if args.profile:
        report_profile(size, bab)


def report_info(size: int, bab: dict[str, Any]) -> None:
    rows = []
    windows = [*bab["windows"], bab["steady"]]
    for n, w in enumerate(windows):
        keys = sorted({k for counts in w["info"].values() for k in counts})
        for key in keys:
            per_node = {node: counts.get(key, 0) for node, counts in w["info"].items()}
            most = max(per_node, key=lambda node: per_node[node])
            rows.append(
                [
                    label(w, steady=n == len(windows) - 1),
                    key,
                    sum(per_node.values()),
                    sum(per_node.values()) / len(per_node),
                    f"{per_node[most]} ({most})",
                    len(per_node),
                ]
            )
    if rows:
        header = ["s from t0", "counter", "mesh", "per node", "most (node)", "nodes read"]
        print(common.table(f"\nNode info per window (stats), {size} nodes", header, rows))


def report_profile(size: int, bab: dict[str, Any]) -> None:
    first, steady = bab.get("profile_first"), bab.get("profile_steady")
    if not first or not steady:
        return
    rows = [
        [
            source,
            first["share_percent"][source],
            first["core_percent_per_node"][source],
            steady["share_percent"][source],
            steady["core_percent_per_node"][source],
        ]
        for source in profile_sources.SOURCES
    ]
    rows.append(
        [
            "all babblerd samples",
            first["samples"],
            sum(first["core_percent_per_node"].values()),
            steady["samples"],
            sum(steady["core_percent_per_node"].values()),
        ]
    )
    header = [
        "source of work", f"first {first['seconds']} s: % samples", "% core per node",
        f"steady {steady['seconds']} s: % samples", "% core per node",
    ]  # fmt: skip
    title = f"\nbabblerd's CPU by source (py-spy, {first['rate']}/s), {size} nodes"
    print(common.table(title, header, rows))
    for phase in (first, steady):
        if phase["failed"]:
            print(f"py-spy failed on {len(phase['failed'])} pids: {phase['failed'][0]}")
    print(
        f"py-spy's own CPU: {first['pyspy_cpu_percent']:.1f} % of one core (first), "
        f"{steady['pyspy_cpu_percent']:.1f} % (steady)"
    )
    top = []
    for name, phase in (("first", first), ("steady", steady)):
        samples = max(phase["samples"], 1)
        top += [[name, where, 100 * count / samples] for where, count in phase["top"][:TOP]]
    header = ["phase", "innermost babbler function", "% samples"]
    print(common.table(f"\nWhere inside, {size} nodes", header, top))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[12, 32])
    parser.add_argument("--topology", default="ring", choices=["ring", "grid"])
    parser.add_argument("--hello", type=float, default=DEFAULT_HELLO_INTERVAL, help="seconds")
    parser.add_argument("--windows", type=int, default=6, help="windows from t0")
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--steady", type=float, default=30.0, help="seconds before the last")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds to reach t0")
    parser.add_argument("--profile", action="store_true", help="py-spy on every babblerd")
    parser.add_argument("--rate", type=int, default=RATE, help="py-spy samples a second")
    parser.add_argument("--profile-dir", type=Path, help="py-spy's raw files [a new temp dir]")
    parser.add_argument(
        "--profile-nodes", type=int, help="py-spy on this many babblerd only [all]: at 64 "
        "nodes one py-spy each would take the cores it measures",
    )  # fmt: skip
    parser.add_argument("--babbler-mode", default="babbler", choices=list(BABBLER_MODES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.windows < 1 or args.window <= 0:
        parser.error("--windows must be at least 1 and --window more than 0 seconds")
    common.need_root()
    if args.profile and not PYSPY.exists():
        sys.exit(f"--profile needs py-spy next to {sys.executable}: pip install py-spy")
    folder = None
    if args.profile:
        folder = args.profile_dir or Path(tempfile.mkdtemp(prefix="first-minute-"))
        folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "topology": args.topology,
        "hello_s": args.hello,
        "windows": args.windows,
        "window_s": args.window,
        "steady_after_s": args.steady,
        "profile": args.profile,
        "sizes": {},
    }
    for size in args.sizes:
        reference = run(size, REFERENCE, args, None)
        babbler = run(size, args.babbler_mode, args, folder)
        data["sizes"][str(size)] = {
            "reference": reference,
            "babbler": babbler,
            "ratios": ratios(reference, babbler),
        }
        path = common.write("first_minute", data, args.out)
        report(size, args, reference, babbler)
        print(f"\nwrote {path}" + (f" (py-spy's raw files in {folder})" if folder else ""))


if __name__ == "__main__":
    main()

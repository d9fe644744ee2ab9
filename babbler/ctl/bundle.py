"""`babblerctl doctor --bundle FILE`: one tarball for a bug report: the doctor's checks with
the probe, babblerd's status and nodes, the log's last lines (journald's, or the log file:
README.txt says which), the versions, and the kernel settings babblerd changed (its state
dir's record). Never the mesh key: babblerd keeps it out of status and its log, and every
run of 32 or more hex digits (a key's shortest) is replaced in every file here besides."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
import tarfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from babbler import __version__
from babbler.ctl.doctor import run_command
from babbler.host.record import LINUX_BOOT, PROC_SYS, read_record
from babbler.ui.doctor import Check, Facts

Run = Callable[[Sequence[str]], str]
LOG_LINES = 500
LOG_FILE = Path("/var/log/babblerd.log")  # launchd's (the plist), or where one sends it
HEX_RUN = re.compile(r"[0-9A-Fa-f]{32,}")  # a mesh key is 32 to 128 hex digits
HIDDEN = "[hex removed]"


def tail(path: Path, lines: int = LOG_LINES) -> str:
    with path.open(errors="replace") as file:
        return "".join(deque(file, maxlen=lines))


def log_lines(given: Path | None, run: Run) -> tuple[str, str]:
    """(the log's last lines, where they came from): `given`, else journald's babblerd unit
    when it has entries, else LOG_FILE."""
    if given is not None:
        return _file(given)
    if shutil.which("journalctl"):
        try:
            text = run(["journalctl", "-u", "babblerd", "-n", str(LOG_LINES), "--no-pager"])
        except OSError:
            text = ""
        if any(line and not line.startswith("-- ") for line in text.splitlines()):
            return text, "journalctl -u babblerd"
    if LOG_FILE.exists():
        return _file(LOG_FILE)
    return "", f"no log: journald has no babblerd unit and there is no {LOG_FILE} (--log-file)"


def _file(path: Path) -> tuple[str, str]:
    try:
        return tail(path), str(path)
    except OSError as error:
        return "", f"could not read {path}: {error.strerror or error} (run as root)"


def kernel_settings(state_dir: Path) -> dict[str, object]:
    try:
        boot = (PROC_SYS / LINUX_BOOT).read_text().strip() if PROC_SYS.exists() else ""
        record = read_record(state_dir, boot)
    except OSError as error:
        return {"error": f"could not read {state_dir}: {error.strerror or error} (run as root)"}
    return {name.replace("/", "."): {"before": a, "set": b} for name, (a, b) in record.items()}


def contents(
    facts: Facts, found: Sequence[Check], state_dir: Path, log_file: Path | None, run: Run
) -> tuple[dict[str, str], str]:
    """The bundle's files (name -> text) and where its log came from."""
    raw = dict(facts.status.raw) if facts.status is not None else None
    log, source = log_lines(log_file, run)
    versions = {
        "babbler": __version__,
        "babblerd": raw.get("version") if raw else None,
        "babeld": (raw.get("babeld") or {}).get("version") if raw else facts.babeld_version,
        "python": sys.version.split()[0],
        "system": " ".join(os.uname()),
        "platform": facts.platform,
    }
    files = {
        "doctor.json": [asdict(c) for c in found],
        "status.json": raw if raw is not None else {"error": facts.status_error},
        "nodes.json": (raw or {}).get("nodes", []),
        "versions.json": versions,
        "kernel-settings.json": kernel_settings(state_dir),
    }
    out = {name: json.dumps(value, indent=2, default=str) + "\n" for name, value in files.items()}
    out["log.txt"] = log
    out["README.txt"] = (
        f"babblerctl doctor --bundle, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n"
        "doctor.json: the doctor's checks and the probe's (docs/operations.md)\n"
        "status.json, nodes.json: babblerd's status and its nodes\n"
        f"log.txt: the last {LOG_LINES} lines of babblerd's log, from {source}\n"
        "versions.json: babbler, babblerd, babeld, Python, the system\n"
        "kernel-settings.json: the settings babblerd changed (before, set), its state dir's "
        "record\n"
        f"Runs of 32 or more hex digits are replaced by {HIDDEN}: never a mesh key.\n"
    )
    files = {name: HEX_RUN.sub(HIDDEN, text) for name, text in out.items()}
    return files, HEX_RUN.sub(HIDDEN, source)


def write_bundle(
    path: Path,
    facts: Facts,
    found: Sequence[Check],
    state_dir: Path,
    log_file: Path | None = None,
    run: Run | None = None,
) -> str:
    """Write the tarball (gzip, 0600: it names the mesh's machines) and say what it holds."""
    files, source = contents(facts, found, state_dir, log_file, run or run_command)
    folder = f"babbler-doctor-{time.strftime('%Y%m%d-%H%M%S')}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)  # O_CREAT's mode is for a new file; an old one keeps its own
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
            tar.addfile(info, io.BytesIO(data))
    return f"wrote {path}: {', '.join(files)} (log from {source})"

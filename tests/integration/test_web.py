"""`babblerctl web` in a real browser against a lab: Debian's chromium, headless, driven by
Debian's chromedriver through selenium (nothing downloaded). babblerctl web runs in the root
namespace and reads a lab node's socket (it is no babblerd: it only reads a Unix socket);
the browser talks to it over loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from babbler.lab import Lab, Node
from tests.integration.helpers import LabFactory, stats, until
from tests.needs import tool

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CTL = [sys.executable, "-m", "babbler.ctl.main"]
SHOWN = 15.0  # s for the page to show a change: "a few seconds", generous on a shared machine
MALICIOUS = "<img src=x onerror=alert(1)>"  # a peer's name: text, never markup
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
# What the page draws, read from its DOM: each node and each cable as the user sees them.
READ_PAGE = """
const text = (el, sel) => { const x = el.querySelector(sel); return x ? x.textContent : null; };
return {
  nodes: Array.from(document.querySelectorAll('#mesh g.node')).map(g => ({
    id: g.dataset.nodeId, state: g.dataset.state, name: text(g, '.name'), tag: text(g, '.tag')})),
  cables: Array.from(document.querySelectorAll('#mesh g.cable')).map(g => ({
    a: g.dataset.a, b: g.dataset.b,
    a_to_b: g.dataset.aToB === '' ? null : Number(g.dataset.aToB),
    b_to_a: g.dataset.bToA === '' ? null : Number(g.dataset.bToA),
    width: Number(g.querySelector('line').getAttribute('stroke-width')),
    labels: Array.from(g.querySelectorAll('text')).map(t => t.textContent)})),
  log: Array.from(document.querySelectorAll('#log li')).map(li => li.textContent),
  details: document.getElementById('node-details') ?
    document.getElementById('node-details').dataset.nodeId : null,
  detailsText: document.getElementById('details').innerText,
  images: document.querySelectorAll('img').length,
  trouble: document.getElementById('state').classList.contains('error') ?
    document.getElementById('state').textContent : null,
};
"""


def browser_programs() -> tuple[str, str]:
    """chromium and chromedriver, and selenium: skipped without them, a failure in CI."""
    chromium = tool("chromium", "chromium")
    chromedriver = tool("chromedriver", "chromium-driver")
    if importlib.util.find_spec("selenium") is None:
        message = "selenium not installed (scripts/setup --test installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {message}")
        pytest.skip(message)
    return chromium, chromedriver


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WebDriver]:
    chromium, chromedriver = browser_programs()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # selenium-manager never downloads a browser
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium'}")
    options.add_argument("--window-size=1400,1000")
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def free_port(family: socket.AddressFamily = socket.AF_INET) -> int:
    with socket.socket(family) as probe:
        probe.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextmanager
def web(node: Node, log: Path, listen: str | None = None) -> Iterator[str]:
    """`babblerctl web` on the node's socket, in the root namespace; yields its URL."""
    listen = listen or f"127.0.0.1:{free_port()}"
    host, _, port = listen.rpartition(":")
    args = [*CTL, "web", "--socket", str(node.socket), "--listen", listen]
    with log.open("w") as out:
        served = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:

        def answering() -> bool:
            family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
            with socket.socket(family) as probe:
                return probe.connect_ex((host.strip("[]"), int(port))) == 0

        until(lambda: answering() or served.poll() is not None, 30, "babblerctl web serving")
        assert served.poll() is None, log.read_text()
        yield f"http://{listen}/"
        served.terminate()
        assert served.wait(10) == 0, log.read_text()  # SIGTERM ends it cleanly, pages open
    finally:
        if served.poll() is None:
            served.kill()
            served.wait()
        print(f"--- babblerctl web's output:\n{log.read_text()}")


def page(driver: WebDriver) -> dict[str, Any]:
    shown: dict[str, Any] = driver.execute_script(READ_PAGE)
    return shown


def node_id(lab: Lab, node: Node) -> str:
    return str(lab.status(node)["node_id"])


def shown_within(driver: WebDriver, check: Any, what: str, timeout: float = SHOWN) -> None:
    until(lambda: check(page(driver)), timeout, what)


def no_alert(driver: WebDriver) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        driver.switch_to.alert  # noqa: B018 (reading it raises when there is none)
    except NoAlertPresentException:
        return True
    return False


def test_the_page_draws_nodes_as_they_come_and_go(
    make_lab: LabFactory, browser: WebDriver, tmp_path: Path
) -> None:
    lab = make_lab(3, "line", False)
    n1, n2, n3 = lab.nodes
    lab.start(n1)
    lab.start(n2)
    ids = {node.name: node_id(lab, node) for node in (n1, n2, n3) if node is not n3}
    with web(n1, tmp_path / "web.log") as url:
        browser.get(url)

        def both(shown: dict[str, Any]) -> bool:
            states = {(n["id"], n["name"], n["state"]) for n in shown["nodes"]}
            return states == {(ids["n1"], "n1", "me"), (ids["n2"], "n2", "up")}

        shown_within(browser, both, "n1 (this node) and n2 drawn")
        assert [n["tag"] for n in page(browser)["nodes"]] == ["this node", "1 hop"]

        lab.start(n3, extra=["--name", MALICIOUS])  # a peer names itself as markup
        third = node_id(lab, n3)

        def joined(shown: dict[str, Any]) -> bool:
            return any(n["id"] == third and n["state"] == "up" for n in shown["nodes"])

        shown_within(browser, joined, "n3 drawn after it joined")

        def named(shown: dict[str, Any]) -> bool:
            return any(n["id"] == third and n["name"] == MALICIOUS for n in shown["nodes"])

        shown_within(browser, named, "n3's name shown, as text")
        shown = page(browser)
        assert shown["images"] == 0  # the name made no element
        assert no_alert(browser)
        log = shown["log"]  # named by its id when it joined before its info came
        assert any("joined" in line and (third in line or MALICIOUS in line) for line in log), log

        browser.find_element("css selector", f'g.node[data-node-id="{third}"] circle').click()
        shown_within(browser, lambda s: s["details"] == third, "n3's details after a click")
        cabled = "v3x2 to n2 v2x3"  # its cable, both ends (once n2's info says it too)
        hops = "Hops\n2\n"  # once the infos agree on the path
        shown_within(
            browser,
            lambda s: cabled in s["detailsText"] and hops in s["detailsText"],
            "n3's cable and hops in its details",
        )
        details = page(browser)["detailsText"]
        status3 = lab.status(n3)
        assert MALICIOUS in details
        assert status3["node_address"] in details
        assert status3["node_address_v4"] in details
        assert status3["version"] in details

        lab.stop(n3)

        def down(shown: dict[str, Any]) -> bool:
            return any(n["id"] == third and n["state"] == "down" for n in shown["nodes"])

        shown_within(browser, down, "n3 drawn down after its babblerd stopped")
        shown = page(browser)
        assert next(n["tag"] for n in shown["nodes"] if n["id"] == third) == "(down)"
        assert not any(third in (c["a"], c["b"]) for c in shown["cables"])
        assert any(MALICIOUS in line and "left" in line for line in shown["log"]), shown["log"]
        assert no_alert(browser)

        lab.stop(n1)  # the page says babblerd is gone, and follows it when it is back
        shown_within(browser, lambda s: s["trouble"] and str(n1.socket) in s["trouble"], "gone")
        lab.start(n1)
        shown_within(browser, lambda s: s["trouble"] is None and both(s), "n1 back, n2 with it")


def cable_between(shown: dict[str, Any], a: str, b: str) -> dict[str, Any] | None:
    for cable in shown["cables"]:
        if {cable["a"], cable["b"]} == {a, b}:
            found: dict[str, Any] = cable
            return found
    return None


def test_a_cable_shows_its_rate_rise_while_traffic_runs(
    make_lab: LabFactory, browser: WebDriver, tmp_path: Path
) -> None:
    lab = make_lab(2, "line")
    n1, n2 = lab.nodes
    one, two = node_id(lab, n1), node_id(lab, n2)
    with web(n1, tmp_path / "web.log") as url:
        browser.get(url)

        def rated(shown: dict[str, Any]) -> bool:
            cable = cable_between(shown, one, two)
            return cable is not None and None not in (cable["a_to_b"], cable["b_to_a"])

        shown_within(browser, rated, "the cable n1-n2 with a rate each way")
        quiet = cable_between(page(browser), one, two)
        assert quiet is not None
        assert quiet["a_to_b"] < 20_000 and quiet["b_to_a"] < 20_000, quiet  # hellos only
        assert quiet["labels"][0].startswith("10 Gb/s"), quiet  # veth says 10000 Mb/s

        target = lab.status(n2)["node_address"]
        flood = ["ping", "-q", "-s", "1000", "-i", "0.01", "-c", "3000", target]
        traffic = subprocess.Popen(
            ["ip", "netns", "exec", n1.netns, *flood], stdout=subprocess.DEVNULL
        )
        try:

            def busy(shown: dict[str, Any]) -> bool:
                cable = cable_between(shown, one, two)  # ~100 KB/s each way
                return (
                    cable is not None and min(cable["a_to_b"] or 0, cable["b_to_a"] or 0) > 50_000
                )

            shown_within(browser, busy, "the cable's rate risen each way under a ping flood")
            cable = cable_between(page(browser), one, two)
            assert cable is not None
            assert cable["width"] > quiet["width"]  # busier is thicker
            assert any("kb/s" in label or "Mb/s" in label for label in cable["labels"][1:])
        finally:
            traffic.terminate()
            traffic.wait()
        assert lab.status(n1)["clients"] >= 1  # the page's watch
        browser.get("about:blank")  # no page open: babblerctl web asks babblerd nothing

        def quiet_socket() -> bool:
            return bool(lab.status(n1)["clients"] == 0)

        until(quiet_socket, SHOWN, "babblerctl web off n1's socket once no page is open")


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_mesh_as_json_over_ipv6_loopback_and_only_to_loopback_names(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    lab = make_lab(2, "line")
    n1 = lab.nodes[0]
    with web(n1, tmp_path / "web.log", f"[::1]:{free_port(socket.AF_INET6)}") as url:
        until(lambda: len(json.loads(fetch(url + "api/mesh")[1])["mesh"]["nodes"]) == 2, SHOWN)
        code, body = fetch(url + "api/mesh")
        model = json.loads(body)["mesh"]
        assert code == 200
        assert model["me"] == node_id(lab, n1)
        assert [n["name"] for n in model["nodes"]] == ["n1", "n2"]
        code, body = fetch(url + "api/mesh", {"Host": "rebound.example"})  # DNS rebinding
        assert code == 421 and b"n1" not in body
        code, body = fetch(url + "api/mesh", {"Sec-Fetch-Site": "cross-site"})
        assert code == 403 and b"n1" not in body
        code, body = fetch(url + "api/mesh", {"Origin": "http://evil.example"})
        assert code == 403 and b"n1" not in body
        code, body = fetch(url + "metrics")  # babblerctl metrics' text, for Prometheus
        assert code == 200 and b"\nbabbler_up 1" in body
        code, body = fetch(url + "static/mesh.js")
        assert code == 200 and b"textContent" in body
        code, body = fetch(url)
        assert code == 200 and b"/static/mesh.js" in body and b"http" not in body


# Another site's page in the same browser: it asks the mesh's page every 100 ms and keeps its
# events open; it can read nothing either way, but each ask would make babblerd fetch counters.
FOREIGN = """<!doctype html><title>another site</title><script>
window.tries = 0;
const web = new URLSearchParams(location.search).get("web");
new EventSource(web + "events");
setInterval(() => fetch(web + "api/mesh", {mode: "no-cors"}).finally(() => window.tries++), 100);
</script>"""


@contextmanager
def another_site(root: Path) -> Iterator[str]:
    """A plain web site on 127.0.0.2 (another site than 127.0.0.1 to the browser)."""
    root.mkdir()
    (root / "index.html").write_text(FOREIGN)
    handler = partial(SimpleHTTPRequestHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.2", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.2:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_another_site_in_the_browser_keeps_babblerctl_and_babblerd_idle(
    make_lab: LabFactory, browser: WebDriver, tmp_path: Path
) -> None:
    lab = make_lab(2, "line")
    n1 = lab.nodes[0]
    lab.wait_reachable(60)
    with web(n1, tmp_path / "web.log") as url, another_site(tmp_path / "site") as site:
        asked = stats(n1)["counters_asks"]
        browser.get(f"{site}?web={url}")
        until(lambda: browser.execute_script("return window.tries") >= 30, SHOWN, "its asks")
        time.sleep(4)  # babblerd's viewer would have asked n2 each second
        assert stats(n1)["counters_asks"] == asked
        assert lab.status(n1)["clients"] == 0  # no watch: babblerctl web is not following
        browser.get(url)  # the page itself, in the same browser, still shows the mesh
        shown_within(browser, lambda s: len(s["nodes"]) == 2 and s["trouble"] is None, "mesh")
        until(lambda: stats(n1)["counters_asks"] > asked, SHOWN, "the page's counters")

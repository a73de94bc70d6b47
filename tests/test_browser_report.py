"""index.html in a real browser: Debian's headless Chromium, driven over the DevTools protocol
(`--remote-debugging-pipe`: JSON messages on file descriptors 3 and 4, no extra package).

The page must render its case rows and plots, sort its tables, link reproducers, log no console
error and load nothing from the network. The screenshot goes to $ROUNDTRIP_SCREENSHOT when set
(CI keeps it), else into the test's temporary directory.

Chromium comes from `apt-get install chromium` (.ci/run installs it when missing). Without it the
test skips, unless ROUNDTRIP_REQUIRE_BROWSER=1, which .ci/run sets when it has the browser.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.report.document import case_from_verification, crashed_case, error_case
from harness.report.writer import write_report_dir
from tests.test_report_document import document, op_row, passing_case, verification

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-pipe"]

if CHROMIUM is None and os.environ.get("ROUNDTRIP_REQUIRE_BROWSER") == "1":
    raise RuntimeError("ROUNDTRIP_REQUIRE_BROWSER=1 but no chromium on PATH: apt-get install chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                "(apt-get install chromium; .ci/run does)")


class DevTools:
    """A minimal DevTools-protocol client over Chromium's pipe (fd 3: commands, fd 4: replies)."""

    def __init__(self, user_data_dir: Path) -> None:
        to_browser_read, self._write = os.pipe()
        self._read, from_browser_write = os.pipe()

        def wire_descriptors() -> None:
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        self.process = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={user_data_dir}"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=wire_descriptors, pass_fds=(3, 4))
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe (exit code {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(index)
        while True:
            event = self._receive()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def open(self, url: str, width: int, height: int) -> None:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except RuntimeError:
            pass
        os.close(self._write)
        os.close(self._read)
        self.process.wait()


def _report(out: Path) -> dict:
    """A report with every kind of case: passing, failing with reproducers, crashed, refused; and a
    baseline it regressed against."""
    ops = [op_row(f"node_{i}", 10 ** ((i % 9) - 6)) for i in range(60)] + [op_row("conv_bad", 3.0, passed=False)]
    record = verification(ops, passed=False)
    second = [{**op, "backend": "openvino", "blame": "runtime" if op["fx_node"] == "node_3" else ""} for op in ops]
    second[3] = {**op_row("node_3", 40.0, passed=False), "backend": "openvino", "blame": "runtime"}
    record["backend_results"] = [{"backend": "openvino", "passed": False, "skipped": "", "outputs": record["outputs"],
                                  "ops": second, "worst_op": "node_3", "settings": {}, "notes": [], "timings": {}}]
    failing = case_from_verification(record, name="failing_net", other=verification([]),
                                     seconds=2.5, reproducer={"conv_bad": "reproducers/failing_net/conv_bad"},
                                     sizes=["batch 2", "batch 3"])
    doc = document([passing_case("passing_net"), failing,
                    crashed_case("crashing_net", reason="segmentation fault", signal="SIGSEGV", log_tail=["boom"]),
                    error_case("refused_net", error="export: ExportError: aten.foo has no symbolic")])
    baseline = json.loads(json.dumps(doc))
    baseline["cases"][1]["status"] = "pass"
    write_report_dir(doc, out, baseline=baseline, baseline_path="reports/baseline")
    return doc


def test_index_html_renders_in_chromium(tmp_path):
    out = tmp_path / "report"
    doc = _report(out)
    screenshot = Path(os.environ.get("ROUNDTRIP_SCREENSHOT") or tmp_path / "index.png")
    browser = DevTools(tmp_path / "profile")
    try:
        browser.open((out / "index.html").as_uri(), 1280, 1600)
        rows = browser.evaluate("[...document.querySelectorAll('#status-grid tr.case-row')].map(r => "
                                "[r.dataset.case, ...[...r.cells].slice(1, 4).map(c => c.className)])")
        plots = browser.evaluate("document.querySelectorAll('figure svg.plot').length")
        plot_lines = browser.evaluate("document.querySelectorAll('section[data-case=failing_net] svg path').length")
        plot_text = browser.evaluate("document.querySelector('section[data-case=failing_net] svg').textContent")
        link = browser.evaluate("document.querySelector('a.reproducer').getAttribute('href')")
        backend_cells = browser.evaluate("[...document.querySelectorAll('#backend-grid td[data-backend]')].map(c => "
                                         "c.dataset.status)")
        faults = browser.evaluate("[...document.querySelectorAll('table.backends-side-by-side td.fault')].map(c => "
                                  "[c.closest('tr').dataset.fxNode, c.dataset.backend, c.dataset.fault])")
        regressions = browser.evaluate("document.querySelectorAll('#diff-regressions tbody tr').length")
        ready = browser.evaluate("document.body.dataset.sortableReady")
        browser.evaluate("document.querySelectorAll('#status-grid th')[7].click()")  # seconds, ascending
        ascending = browser.evaluate("[...document.querySelectorAll('#status-grid tr.case-row')].map(r => r.dataset.case)")
        browser.evaluate("document.querySelectorAll('#status-grid th')[7].click()")  # descending
        descending = browser.evaluate("[...document.querySelectorAll('#status-grid tr.case-row')].map(r => r.dataset.case)")
        screenshot.write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", format="png")["data"]))
    finally:
        browser.close()

    assert rows == [["passing_net", "pass", "pass", "pass"], ["failing_net", "fail", "fail", "pass"],
                    ["crashing_net", "crashed", "crashed", "crashed"], ["refused_net", "error", "error", "error"]]
    assert plots == 1 + 2  # headroom per op kind, and one per case with per-op rows
    assert plot_lines > 10 and "tolerance" in plot_text and "isolated" in plot_text
    assert link == "reproducers/failing_net/conv_bad/README.md"
    assert regressions == 1 and ready == "true"
    assert backend_cells == ["pass", "not-run", "fail", "fail", "crashed", "crashed", "error", "error"]
    assert [f for f in faults if f[0] == "node_3"] == [["node_3", "openvino", "runtime"]]
    assert [f for f in faults if f[0] == "conv_bad"] == [["conv_bad", "onnxruntime", "fail"],
                                                         ["conv_bad", "openvino", "fail"]]
    seconds = {c["name"]: c["seconds"] for c in doc["cases"]}
    timed = sorted((n for n in seconds if seconds[n] is not None), key=seconds.get)
    assert ascending[:len(timed)] == timed and descending[-len(timed):] == timed[::-1]
    errors = [e for e in browser.events if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == []
    requested = [e["params"]["request"]["url"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
    assert requested and all(url.startswith(("file:", "data:", "about:")) for url in requested), requested
    assert screenshot.read_bytes().startswith(b"\x89PNG")

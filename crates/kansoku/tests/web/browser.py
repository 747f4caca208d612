#!/usr/bin/env python3
"""Drives headless Chromium through `kansoku web`'s page, as a user would.

Usage: browser.py URL SCREENSHOT.png

Talks the DevTools protocol over a pipe (--remote-debugging-pipe: no port,
no extra Python package). Loads the page, checks its chart and table against
the JSON API, drags across the bytes chart (zoom), clicks an aggregate
(drill-down), goes back, and saves a screenshot that must not be blank.
Prints one line per check; exits non-zero on the first failure.
"""

import base64
import ipaddress
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import zlib

TIMEOUT = 60.0


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    fail("no chromium (scripts/install-deps.sh installs it)")


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="kansoku-chromium-")
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()

        def fds():
            a, b = os.dup(cmd_r), os.dup(res_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
             "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,1000",
             "--user-data-dir=" + self.profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=fds)
        os.close(cmd_r)
        os.close(res_w)
        self.w = os.fdopen(cmd_w, "wb", buffering=0)
        self.r = os.fdopen(res_r, "rb", buffering=0)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        want = self.next_id
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            m = self.read()
            if m.get("id") == want:
                if "error" in m:
                    fail("%s: %s" % (method, m["error"]))
                return m.get("result", {})
        fail("no answer to " + method)

    def read(self):
        while b"\0" not in self.buf:
            chunk = self.r.read(65536)
            if not chunk:
                fail("chromium closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def open(self):
        t = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        a = self.send("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True},
                      session=False)
        self.session = a["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False})

    def eval(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            fail("script error in %r: %s" % (expr[:60], r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_ready(self, serial):
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            err = self.eval("document.body && document.body.dataset.error || ''")
            if err:
                fail("the page shows an error: " + err)
            v = self.eval("document.body && document.body.dataset.ready || '0'")
            if int(v) >= serial:
                return
            time.sleep(0.1)
        fail("the page did not draw answer %d" % serial)

    def mouse(self, kind, x, y):
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                               "buttons": 1 if kind != "mouseReleased" else 0,
                                               "clickCount": 1})

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except SystemExit:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def api(base, search):
    q = search[1:] if search.startswith("?") else search
    with urllib.request.urlopen(base + "api/v1/view?" + q, timeout=30) as r:
        return json.load(r)


def rows(b):
    return b.eval("""[...document.querySelectorAll('#table tbody tr')].map(
        tr => [tr.dataset.label, Number(tr.dataset.bytes), Number(tr.dataset.packets)])""")


def check_page_matches_api(b, base, what):
    search = b.eval("location.search")
    d = api(base, search)
    want = sorted([a["label"], a["total"]["bytes"], a["total"]["packets"]] for a in d["aggregates"])
    got = sorted(rows(b))
    if got != want:
        fail("%s: the table %s differs from the API's %s" % (what, got[:5], want[:5]))
    bands = b.eval("[...document.querySelectorAll('#chart-bytes path.band')].map(p => p.dataset.label)")
    drawn = sorted(set(bands))
    nonzero = sorted(a["label"] for a in d["aggregates"] if a["total"]["bytes"] > 0)
    if drawn != nonzero:
        fail("%s: the chart draws %s, the API has %s" % (what, drawn[:5], nonzero[:5]))
    within = b.eval("document.querySelector('#within').children[2].textContent")
    if int(within.replace(",", "")) != d["within"]["bytes"]:
        fail("%s: the table's total %s is not the API's %d" % (what, within, d["within"]["bytes"]))
    if sum(a["total"]["bytes"] for a in d["aggregates"]) != d["within"]["bytes"]:
        fail("%s: the aggregates do not add up" % what)
    print("ok: %s: %d aggregates in table and chart, as the API says (%s)"
          % (what, len(want), search), flush=True)
    return d


def contains(outer, inner):
    """Whether label `inner` lies inside `outer` (addresses only)."""
    try:
        a, b = ipaddress.ip_network(outer), ipaddress.ip_network(inner)
    except ValueError:
        return None
    return a.version == b.version and b.subnet_of(a)


def png_pixels(data):
    """(width, height, bytes per pixel, rows of raw pixels) of an 8-bit PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("the screenshot is not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, color = ihdr[0], ihdr[1], ihdr[2], ihdr[3]
    if depth != 8 or color not in (2, 6):
        fail("unexpected PNG format %s" % (ihdr,))
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    out, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + up) & 255
            elif f == 3:
                line[i] = (line[i] + (a + up) // 2) & 255
            elif f == 4:
                p = a + up - c
                pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (up if pb <= pc else c)
                line[i] = (line[i] + pr) & 255
        out.append(bytes(line))
        prev = line
    return w, h, bpp, out


def check_pcap_links(b, base, d):
    """The server has traces: every aggregate row but "other" offers its
    packets in the range drawn, and the link answers a pcap file of the
    aggregate's expression."""
    links = b.eval("""[...document.querySelectorAll('#table tbody tr:not(.other)')].map(
        tr => [tr.dataset.label, (tr.querySelector('a.pcap') || {}).href || null])""")
    if not links or any(href is None for _, href in links):
        fail("rows without a pcap link: %s" % links[:5])
    label, href = links[0]
    q = urllib.parse.parse_qs(urllib.parse.urlparse(href).query)
    want = {"view": [d["view"]], "from": [str(d["from"])], "to": [str(d["to"])], "drill": [label]}
    if q != want:
        fail("the pcap link of %s asks %s, not %s" % (label, q, want))
    with urllib.request.urlopen(href, timeout=60) as r:
        kind, expr, body = r.headers["content-type"], r.headers["x-kansoku-expression"], r.read()
    if kind != "application/vnd.tcpdump.pcap" or body[:4] != b"\x4d\x3c\xb2\xa1":
        fail("the pcap link of %s answered %s, %r" % (label, kind, body[:8]))
    if label.split("/")[0] not in (expr or ""):
        fail("the pcap link of %s selects %r" % (label, expr))
    print("ok: %d pcap links; %s's is %d bytes of `%s`" % (len(links), label, len(body), expr), flush=True)


def main():
    if len(sys.argv) != 3:
        fail(__doc__)
    base, shot = sys.argv[1], sys.argv[2]
    if not base.endswith("/"):
        base += "/"
    b = Browser()
    try:
        b.open()
        b.send("Page.navigate", {"url": base})
        b.wait_ready(1)
        first = check_page_matches_api(b, base, "first load")
        if "from=" not in b.eval("location.search"):
            fail("the URL does not hold the range")
        check_pcap_links(b, base, first)

        # Zoom: drag across the middle of the bytes chart.
        box = b.eval("""(() => { const s = document.getElementById('chart-bytes');
            const r = s.getBoundingClientRect();
            return [r.left, r.top, r.width, r.height, Number(s.dataset.plotLeft),
                    Number(s.dataset.plotWidth), s.viewBox.baseVal.width]; })()""")
        left, top, width, height, pl, pw, vbw = box
        k = width / vbw
        x0, x1 = left + (pl + 0.30 * pw) * k, left + (pl + 0.60 * pw) * k
        y = top + height * 0.5
        b.mouse("mousePressed", x0, y)
        for i in range(1, 6):
            b.mouse("mouseMoved", x0 + (x1 - x0) * i / 5, y)
        b.mouse("mouseReleased", x1, y)
        b.wait_ready(2)
        zoomed = check_page_matches_api(b, base, "after the zoom")
        span0, span1 = first["to"] - first["from"], zoomed["to"] - zoomed["from"]
        if not (zoomed["from"] > first["from"] and zoomed["to"] < first["to"] and span1 < span0 * 0.5):
            fail("the drag did not zoom: %d-%d, then %d-%d" % (first["from"], first["to"],
                                                                zoomed["from"], zoomed["to"]))
        print("ok: zoomed from %d s to %d s" % (span0, span1), flush=True)

        # Drill-down: click the largest aggregate's link in the table.
        target = b.eval("""(() => { const a = document.querySelector('#table tbody tr:not(.other) td a');
            if (!a) return null; const r = a.getBoundingClientRect();
            return [a.textContent, r.left + r.width / 2, r.top + r.height / 2]; })()""")
        if not target:
            fail("no aggregate to drill into")
        label, cx, cy = target
        b.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": cx, "y": cy})
        b.mouse("mousePressed", cx, cy)
        b.mouse("mouseReleased", cx, cy)
        b.wait_ready(3)
        drilled = check_page_matches_api(b, base, "after the drill-down into " + label)
        if drilled["drill"] != label:
            fail("the page drilled into %r, not %r" % (drilled["drill"], label))
        # The children add up to the aggregate: its own count and those of
        # the aggregates inside it in the view it was clicked in.
        inside = [a for a in zoomed["aggregates"] if a["label"] == label or contains(label, a["label"])]
        want = (sum(a["total"]["bytes"] for a in inside), sum(a["total"]["packets"] for a in inside))
        got = (drilled["within"]["bytes"], drilled["within"]["packets"])
        if got != want:
            fail("drill-down into %s: the children hold %s, the aggregate %s" % (label, got, want))
        print("ok: the %d children of %s add up to it: %d bytes, %d packets"
              % (len(drilled["aggregates"]), label, got[0], got[1]), flush=True)

        # Back: the zoomed view again, from history.
        b.eval("history.back()")
        b.wait_ready(4)
        again = check_page_matches_api(b, base, "after going back")
        if (again["from"], again["to"], again["drill"]) != (zoomed["from"], zoomed["to"], None):
            fail("back did not return to the zoomed view")

        shot_data = base64.b64decode(b.send("Page.captureScreenshot", {"format": "png"})["data"])
        with open(shot, "wb") as f:
            f.write(shot_data)
        w, h, bpp, pixels = png_pixels(shot_data)
        colors, inked = set(), 0
        for row in pixels[::4]:
            for i in range(0, len(row), bpp * 4):
                px = row[i:i + 3]
                colors.add(px)
                if px != b"\xff\xff\xff":
                    inked += 1
        total = len(pixels[::4]) * ((w + 3) // 4)
        if inked < total * 0.05 or len(colors) < 8:
            fail("the screenshot looks blank: %d of %d pixels inked, %d colors" % (inked, total, len(colors)))
        print("ok: screenshot %dx%d, %.0f%% of its pixels inked, %d colors, saved to %s"
              % (w, h, 100.0 * inked / total, len(colors), shot), flush=True)
    finally:
        b.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""browser_check.py SITE SCREENSHOT.png [ROOT]: load every page of a built site in headless Chromium.

Drives Chromium through the DevTools protocol on a pipe (--remote-debugging-pipe: no
network port, no websocket, standard library only). For each SITE/*.html it fails on:
  - a console error (console.error/warn/assert from a script, or a browser log entry of
    level error: failed resource loads, CSP/mixed-content errors...) or an uncaught exception;
  - a request that is not file:// or data: (the site must work offline);
  - an image that did not load, or MathML that did not lay out (a <math> with no size),
    measured with every <details> block opened;
  - a solution excerpt (div.listing from solutions/) that shows as the page loads, or that
    does not show once its block is opened; a <details> block without a visible summary;
  - a page that did not finish loading within the time limit.
Then it writes a PNG screenshot of one lesson page (the first one with math and CUDA
code; DOCS_SCREENSHOT_PAGE=NN-name.html picks another), scrolled to a code block with
math in view, and checks that this page prints to PDF.
With ROOT (the repository the site was built from), it also fails when a page the sources
call for was not loaded: one per lesson folder and one per extra Markdown file of a lesson
(lessons/NN-name/X.md, e.g. WORKLOG.md, whose page is NN-name-x.html).
Environment: CHROMIUM (default: chromium).
"""
import base64
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

PAGE_TIMEOUT = 20.0
WIDTH, HEIGHT = 1280, 1600


class Browser:
    def __init__(self, exe):
        self.profile = tempfile.mkdtemp(prefix="docs-chromium-")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def wire():  # in the child: commands on fd 3, replies on fd 4, inheritable
            a, b = os.dup(to_r), os.dup(from_w)  # above 4, so dup2 below really copies
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
                "--user-data-dir=" + self.profile, "--remote-debugging-pipe",
                f"--window-size={WIDTH},{HEIGHT}", "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, close_fds=False, preexec_fn=wire)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def read_one(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from Chromium")
            r, _, _ = select.select([self.from_r], [], [], left)
            if r:
                chunk = os.read(self.from_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the pipe (did it crash?)")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None, timeout=PAGE_TIMEOUT):
        want = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self.read_one(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, name, timeout):
        deadline = time.monotonic() + timeout
        for i, ev in enumerate(self.events):
            if ev["method"] == name:
                del self.events[i]
                return ev
        while True:
            msg = self.read_one(deadline)
            if "method" in msg:
                if msg["method"] == name:
                    return msg
                self.events.append(msg)

    def drain(self, seconds):
        deadline = time.monotonic() + seconds
        try:
            while True:
                msg = self.read_one(deadline)
                if "method" in msg:
                    self.events.append(msg)
        except TimeoutError:
            pass

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


PROBE = """(() => {
  const box = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  // As loaded, the solution's code is hidden (each excerpt in a closed details.solution) and
  // every collapsed block shows its summary. Then open them all so that what they hold (math
  // in a hint, the code) is laid out and checked like the rest of the page.
  const solutions = [...document.querySelectorAll('div.listing[data-file^="solutions/"]')];
  // A closed details lays out its content but skips it (content-visibility): ask the browser.
  const shown = e => box(e) && (!e.checkVisibility || e.checkVisibility());
  const solutionsInView = solutions.filter(shown).map(e => e.dataset.file + (e.dataset.region ? ' ' + e.dataset.region : ''));
  const details = [...document.querySelectorAll('details')];
  const summariesHidden = details.filter(d => !d.querySelector(':scope > summary') || !shown(d.querySelector(':scope > summary'))).length;
  details.forEach(d => { d.open = true; });
  const solutionsUnlaid = solutions.filter(e => !shown(e)).length;
  const maths = [...document.querySelectorAll('math')];
  const imgs = [...document.images];
  const code = document.querySelectorAll('pre.sourceCode code span.kw, pre.sourceCode code span.dt, '
                                         + 'pre.sourceCode code span.at, pre.sourceCode code span.fu');
  return JSON.stringify({
    title: document.title,
    solutions: solutions.length, solutionsInView, solutionsUnlaid,
    details: details.length, summariesHidden,
    math: maths.length, mathUnlaid: maths.filter(m => !box(m)).length,
    mathStyled: maths.length ? getComputedStyle(maths[0]).display : '',
    code: document.querySelectorAll('pre.sourceCode').length, highlighted: code.length,
    cuda: document.querySelectorAll('pre.sourceCode.cuda').length,
    brokenImages: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    styled: document.styleSheets.length === 1 &&
            getComputedStyle(document.querySelector('main')).maxWidth !== 'none',
  });
})()"""

FOCUS = """(() => {
  // Scroll to the first code block (CUDA first) that has math in view with it, the block
  // a little below the middle of the screen; at the top if both already fit there. A
  // solution's code is opened for the picture (a student's click), the others stay closed.
  const H = window.innerHeight, y0 = window.scrollY;
  const top = e => e.getBoundingClientRect().top + y0;
  const maths = [...document.querySelectorAll('main math')].map(top);
  const blocks = [...document.querySelectorAll('main pre.sourceCode.cuda'),
                  ...document.querySelectorAll('main pre.sourceCode:not(.cuda)')];
  for (const b of blocks) {
    const shut = b.closest('details:not([open])');
    if (shut) shut.open = true;
    const t = top(b), y = Math.max(0, t < H - 300 ? 0 : t - 0.55 * H);
    if (maths.some(m => m >= y + 40 && m <= y + H - 60) && t + 200 <= y + H) {
      window.scrollTo(0, y);
      return window.scrollY;
    }
    if (shut) shut.open = false;
  }
  window.scrollTo(0, 0);
  return 0;
})()"""


def problems_of(events, page):
    out = []
    for ev in events:
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"uncaught exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"console.{p['type']}: {args}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            out.append(f"console {e['level']} ({e.get('source')}): {e.get('text')} {e.get('url', '')}")
        elif m == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if not (url.startswith("file://") or url.startswith("data:") or url == "about:blank"):
                out.append(f"network request: {url}")
        elif m == "Network.loadingFailed":
            out.append(f"failed to load: {p.get('errorText')} ({p.get('type')})")
    return [f"{page}: {x}" for x in out]


def expected_pages(root):
    """The lesson pages docs/build.sh makes from ROOT: (NN-name.html pages, NN-name-x.html pages)."""
    lessons_dir = os.path.join(root, "lessons")
    main, extra = [], []
    for d in sorted(os.listdir(lessons_dir) if os.path.isdir(lessons_dir) else []):
        if not re.match(r"^[0-9][0-9]-", d) or not os.path.isdir(os.path.join(lessons_dir, d)):
            continue
        for f in sorted(os.listdir(os.path.join(lessons_dir, d))):
            if f == "README.md":
                main.append(d + ".html")
            elif f.endswith(".md"):
                extra.append(d + "-" + re.sub(r"[^a-z0-9-]", "-", f[:-3].lower()) + ".html")
    return main, extra


def main(site, shot, root=None):
    exe = os.environ.get("CHROMIUM", "chromium")
    site = os.path.realpath(site)
    pages = sorted(f for f in os.listdir(site) if f.endswith(".html"))
    if not pages:
        print(f"docs-browser-check: no pages in {site}")
        return 1
    errors, info = [], {}
    main_pages, extra = expected_pages(root) if root else ([], [])
    errors += [f"{p}: expected from the lesson sources, not in the site" for p in main_pages + extra
               if p not in pages]
    b = Browser(exe)
    try:
        t = b.call("Target.createTarget", {"url": "about:blank"}, timeout=60)
        s = b.call("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True})["sessionId"]
        for dom in ("Page", "Runtime", "Log", "Network"):
            b.call(dom + ".enable", session=s)
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session=s)
        for page in pages:
            b.events.clear()
            url = "file://" + os.path.join(site, page)
            try:
                nav = b.call("Page.navigate", {"url": url}, session=s)
                if nav.get("errorText"):
                    errors.append(f"{page}: navigation failed: {nav['errorText']}")
                    continue
                b.wait_event("Page.loadEventFired", PAGE_TIMEOUT)
                # the site has no scripts: what a page reports (a failed image, a console
                # message) comes before its load event; a short drain takes what is in flight
                b.drain(0.1)
                res = b.call("Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=s)
            except TimeoutError:
                errors.append(f"{page}: did not load within {PAGE_TIMEOUT:.0f} s")
                continue
            if "exceptionDetails" in res:
                errors.append(f"{page}: the check's probe failed: {res['exceptionDetails']}")
                continue
            r = json.loads(res["result"]["value"])
            info[page] = r
            errors += problems_of(b.events, page)
            if r["solutionsInView"]:
                errors.append(f"{page}: solution code in view as the page loads (not in a closed "
                              f"details.solution): {r['solutionsInView']}")
            if r["solutionsUnlaid"]:
                errors.append(f"{page}: {r['solutionsUnlaid']} of {r['solutions']} solution excerpts "
                              "do not show when their block is opened")
            if r["summariesHidden"]:
                errors.append(f"{page}: {r['summariesHidden']} of {r['details']} collapsed blocks "
                              "show no summary line to open them by")
            if r["mathUnlaid"]:
                errors.append(f"{page}: {r['mathUnlaid']} of {r['math']} <math> elements have no size "
                              "(MathML not rendered)")
            if r["brokenImages"]:
                errors.append(f"{page}: images that did not load: {r['brokenImages']}")
            if not r["styled"]:
                errors.append(f"{page}: style.css not loaded or not applied")
            if r["code"] and not r["highlighted"]:
                errors.append(f"{page}: code blocks without highlighting")
            print(f"docs-browser-check: {page}: {r['math']} math, {r['code']} code blocks "
                  f"({r['solutions']} solution excerpts, collapsed), "
                  f"{len(problems_of(b.events, page))} console problems")

        # Screenshot of one lesson page showing math and code.
        want = os.environ.get("DOCS_SCREENSHOT_PAGE")
        lessons = [p for p in pages if p[:2].isdigit()]
        pick = want or next((p for p in lessons if info.get(p, {}).get("math") and info[p].get("cuda")),
                            None) or next((p for p in lessons if info.get(p, {}).get("math") and info[p].get("highlighted")),
                            next((p for p in lessons if info.get(p, {}).get("math") or info[p].get("code")),
                                 lessons[0] if lessons else None))
        if pick is None:
            print("docs-browser-check: note: no lesson page yet, no screenshot taken")
        else:
            b.call("Page.navigate", {"url": "file://" + os.path.join(site, pick)}, session=s)
            b.wait_event("Page.loadEventFired", PAGE_TIMEOUT)
            b.call("Runtime.evaluate", {"expression": FOCUS, "returnByValue": True}, session=s)
            b.drain(0.3)
            png = b.call("Page.captureScreenshot", {"format": "png"}, session=s)["data"]
            with open(shot, "wb") as fh:
                fh.write(base64.b64decode(png))
            # It must also print (the print style hides the navigation): a non-trivial PDF.
            b.call("Runtime.evaluate", {"expression": "window.scrollTo(0, 0)"}, session=s)
            pdf = base64.b64decode(b.call("Page.printToPDF", {"printBackground": False}, session=s,
                                          timeout=60)["data"])
            if not pdf.startswith(b"%PDF") or len(pdf) < 5000:
                errors.append(f"{pick}: printing to PDF gave {len(pdf)} bytes")
            r = info.get(pick, {})
            print(f"docs-browser-check: {pick} prints to a {len(pdf) // 1024} KiB PDF")
            print(f"docs-browser-check: screenshot of {pick} ({r.get('math', 0)} math, "
                  f"{r.get('code', 0)} code blocks) -> {shot}")
    finally:
        b.close()
    for e in errors:
        print("docs-browser-check: " + e)
    print(f"docs-browser-check: {len(pages)} pages" + (f" ({len(extra)} extra lesson pages: {', '.join(extra)})" if extra else "")
          + f": {'FAILED' if errors else 'OK'}")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))

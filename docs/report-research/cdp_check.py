#!/usr/bin/env python3
"""Drive Chromium via --remote-debugging-pipe (stdlib only): load a file, collect console
errors / exceptions / network requests, check selectors, take a screenshot."""
import base64, json, os, subprocess, sys, time

def main(chrome, url, png, selectors):
    r_to_chrome, w_to_chrome = os.pipe()    # chrome reads fd 3
    r_from_chrome, w_from_chrome = os.pipe()  # chrome writes fd 4
    def child():
        a, b = os.dup(r_to_chrome), os.dup(w_from_chrome)  # avoid clobbering if pipes landed on 3/4
        os.dup2(a, 3); os.dup2(b, 4)  # dup2 makes them inheritable (os.pipe fds are O_CLOEXEC)
    p = subprocess.Popen([chrome, "--headless=new", "--no-sandbox", "--remote-debugging-pipe",
                          "--disable-gpu", "--no-first-run", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync",
                          "--window-size=1280,800", "about:blank"],
                         close_fds=False, preexec_fn=child,
                         stdout=subprocess.DEVNULL, stderr=open("/tmp/chr/chrome-stderr.log","w"))
    # after dup2 in child fds 3/4 are set; pass_fds keeps originals open too (harmless)
    os.close(r_to_chrome); os.close(w_from_chrome)
    wf = os.fdopen(w_to_chrome, "wb", buffering=0); rf = os.fdopen(r_from_chrome, "rb", buffering=0)
    buf = b""; nid = [0]; events = []
    def send(method, params=None, session=None):
        nid[0] += 1; m = {"id": nid[0], "method": method, "params": params or {}}
        if session: m["sessionId"] = session
        wf.write(json.dumps(m).encode() + b"\0"); return nid[0]
    def recv():
        nonlocal buf
        while b"\0" not in buf:
            chunk = rf.read(1 << 20)
            if not chunk: raise EOFError("chromium closed the pipe")
            buf += chunk
        msg, buf = buf.split(b"\0", 1); return json.loads(msg)
    def call(method, params=None, session=None):
        i = send(method, params, session)
        while True:
            m = recv()
            if m.get("id") == i:
                if "error" in m: raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            events.append(m)
    t = call("Target.createTarget", {"url": "about:blank"})["targetId"]
    s = call("Target.attachToTarget", {"targetId": t, "flatten": True})["sessionId"]
    for d in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"): call(d, session=s)
    call("Page.navigate", {"url": url}, session=s)
    deadline = time.time() + 30
    while time.time() < deadline:          # wait for load
        m = recv(); events.append(m)
        if m.get("method") == "Page.loadEventFired": break
    time.sleep(0.3)
    r = call("Runtime.evaluate", {"expression": "JSON.stringify(%s.map(s=>!!document.querySelector(s)))" % json.dumps(selectors), "returnByValue": True}, session=s)
    present = dict(zip(selectors, json.loads(r["result"]["value"])))
    shot = call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=s)
    open(png, "wb").write(base64.b64decode(shot["data"]))
    call("Browser.close") if False else send("Browser.close")
    p.wait(timeout=10)
    errors, requests = [], []
    for e in events:
        m, pr = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and pr["type"] in ("error", "assert"):
            errors.append("console.%s: %s" % (pr["type"], " ".join(str(a.get("value", a.get("description"))) for a in pr["args"])))
        elif m == "Runtime.exceptionThrown":
            errors.append("exception: " + pr["exceptionDetails"].get("exception", {}).get("description", pr["exceptionDetails"]["text"]))
        elif m == "Log.entryAdded" and pr["entry"]["level"] == "error":
            errors.append("log: " + pr["entry"]["text"])
        elif m == "Network.requestWillBeSent":
            u = pr["request"]["url"]
            if not (u.startswith("file:") or u.startswith("data:") or u == "about:blank"): requests.append(u)
    print(json.dumps({"url": url, "console_errors": errors, "network_requests": requests, "selectors": present}, indent=1))
    return 1 if errors or requests or not all(present.values()) else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))

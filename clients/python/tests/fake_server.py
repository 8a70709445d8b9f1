"""A stand-in for shepherdd's report endpoint: an http.server on 127.0.0.1:0 in a thread that records
every POST /v1/jobs/{job}/reports and answers 202 (or what a test tells it to). With `redirect_to` set it
plays a follower: 307 (or `redirect_status`) with Location: redirect_to + the request's path."""

import http.server
import json
import threading
import time
from typing import Callable, List, Optional


def as_heartbeat(summary: dict) -> dict:
    """The heartbeat a summary stands for (as the daemon reads it): its rank, time, step and phase, and as
    `collective` the oldest open collective of any group, with the group's name; `summary` keeps the rest."""
    hb = {k: v for k, v in summary.items() if k not in ("groups", "kind")}
    hb["kind"] = "heartbeat"
    hb["summary"] = summary
    opens = [dict(g["open"], group=g["group"]) for g in summary.get("groups", []) if g.get("open")]
    if opens:
        hb["collective"] = min(opens, key=lambda o: o.get("since", 0))
    return hb


class FakeDaemon:
    def __init__(self):
        self.lock = threading.Lock()
        self.posts: List[dict] = []  # {"path", "headers", "body"}
        self.status = 202  # answer for the next POSTs
        self.extra_headers: dict = {}
        self.reject_indices: List[int] = []
        self.redirect_to: Optional[str] = None
        self.redirect_status = 307
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server naming
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with fake.lock:
                    status = fake.status
                    fake.posts.append({"path": self.path, "headers": dict(self.headers), "body": body,
                                       "status": status})
                    rejected = [{"index": i, "error": "test"} for i in fake.reject_indices]
                    extra = dict(fake.extra_headers)
                    if fake.redirect_to:
                        status = fake.redirect_status
                        fake.posts[-1]["status"] = status
                        extra["Location"] = fake.redirect_to + self.path
                if status == 202:
                    out = json.dumps({"accepted": len(body["reports"]) - len(rejected),
                                      "rejected": rejected}).encode()
                    ctype = "application/json"
                else:
                    out = json.dumps({"type": "about:blank", "title": "test", "status": status,
                                      "detail": "fake"}).encode()
                    ctype = "application/problem+json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(out)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def reports(self, kind: Optional[str] = None, accepted_only: bool = True) -> List[dict]:
        with self.lock:
            out = []
            for p in self.posts:
                if accepted_only and p["status"] != 202:
                    continue
                for r in (p["body"] or {}).get("reports", []):
                    if kind == "heartbeat" and r.get("kind") == "summary":
                        out.append(as_heartbeat(r))  # a summary is also the rank's heartbeat
                    elif kind is None or r.get("kind") == kind:
                        out.append(r)
            return out

    def wait_for(self, pred: Callable[[], object], timeout: float = 10.0, what: str = "condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.02)
        raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))

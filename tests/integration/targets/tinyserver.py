"""A stand-in replica for target tests: GET /health -> 200; optional fake TP rank workers; optional TERM ignore.

usage: python tinyserver.py PORT [--ranks N] [--ignore-term] [--exit-after S CODE]
"""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class H(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = b"ok" if self.path == "/health" else b"nope"
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        pass


def main() -> None:
    port, args = int(sys.argv[1]), sys.argv[2:]
    if "--ignore-term" in args:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ranks = int(args[args.index("--ranks") + 1]) if "--ranks" in args else 1
    for r in range(1, ranks):
        subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)", f"chaos-sim-rank{r}"])
    if "--exit-after" in args:
        i = args.index("--exit-after")
        delay, code = float(args[i + 1]), int(args[i + 2])
        threading.Timer(delay, lambda: (sys.stdout.flush(), __import__("os")._exit(code))).start()
    srv = ThreadingHTTPServer(("127.0.0.1", port), H)
    print(f"tinyserver listening on {port}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()

"""A TCP echo for the cable-pull test, run inside a lab namespace:
`echo.py serve PORT` answers every line on both families until killed;
`echo.py talk ADDRESS PORT SECONDS` sends a line every 50 ms for SECONDS, reads each echo,
and prints one JSON line: {"sent", "echoed", "max_gap_s", "error"}."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time


def serve(port: int) -> None:
    listener = socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def talk(address: str, port: int, seconds: float) -> None:
    sent = echoed = 0
    gap = 0.0
    error = None
    conn = socket.create_connection((address, port), timeout=30)
    last = time.monotonic()
    end = last + seconds
    try:
        while time.monotonic() < end:
            conn.sendall(b"x" * 63 + b"\n")
            sent += 1
            got = b""
            while not got.endswith(b"\n"):
                chunk = conn.recv(64)
                if not chunk:
                    raise ConnectionError("closed")
                got += chunk
            echoed += 1
            now = time.monotonic()
            gap, last = max(gap, now - last), now
            time.sleep(0.05)
    except OSError as failure:
        error = str(failure)
    print(json.dumps({"sent": sent, "echoed": echoed, "max_gap_s": round(gap, 3), "error": error}))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        talk(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))

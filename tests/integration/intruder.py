"""What a hostile machine cabled to a node serves, run inside its lab namespace:
`intruder.py info ADDRESS...` answers node-info asks (port 6698) on each address with the
hostile answer of HOSTILE that the address's node id ends in (node id ...0001 gets the
first), and prints `served ADDRESS` per answer; `intruder.py banner TEXT ADDRESS...` sends
TEXT to every TCP connection on port BANNER_PORT of each address, then closes it."""

from __future__ import annotations

import socket
import sys
import threading
from ipaddress import IPv6Address

from babbler.core.addressing import format_node_id, node_id_of
from babbler.core.config import DEFAULT_INFO_PORT

BANNER_PORT = 7007


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# Each answer once stopped babblerd (issue 29), or reached a terminal raw (the last but one).
# `{id}` is the asked node's own id: an answer for another id is refused before its shape
# is read, so each carries the right one.
HOSTILE: list[str] = [
    '{"node_id": "{id}", "neighbours": [{"node_id": [1]}]}',  # unhashable
    '{"node_id": "{id}", "uptime_s": ' + "9" * 5000 + "}",  # json.loads: ValueError
    '{"node_id": "{id}", "info": ' + _deep(5000) + "}",  # RecursionError
    '{"node_id": "{id}", "name": 5}',  # broke the sort of status.nodes
    '{"node_id": "{id}", "name": "five", "interfaces": 5}',
    '{"node_id": "{id}", "name": "\\u001b[2J\\u001b]0;owned\\u0007x\\nn9  fake row",'
    ' "version": "\\u001b[31mred"}',
    '{"node_id": "{id}", "name": "plain", "future_field": {"a": [1, 2]}}',  # fine: kept
]


def answer(address: str) -> bytes:
    node = node_id_of(IPv6Address(address))
    assert node is not None, address
    text = HOSTILE[(node & 0xFFFF) - 1].replace("{id}", format_node_id(node))
    return (text + "\n").encode()


def serve(addresses: list[str], port: int, reply: object) -> None:
    def one(listener: socket.socket, address: str) -> None:
        while True:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(2)
                try:
                    if port == DEFAULT_INFO_PORT:
                        conn.recv(64)
                        conn.sendall(answer(address))
                        sys.stdout.write(f"served {address}\n")
                        sys.stdout.flush()
                    else:
                        conn.sendall(str(reply).encode())
                except OSError:
                    pass

    threads = []
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        listener = socket.create_server((address, port), family=family)
        threads.append(threading.Thread(target=one, args=(listener, address), daemon=True))
    for thread in threads:
        thread.start()
    print("ready", flush=True)
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    if sys.argv[1] == "info":
        serve(sys.argv[2:], DEFAULT_INFO_PORT, None)
    else:
        serve(sys.argv[3:], BANNER_PORT, sys.argv[2])

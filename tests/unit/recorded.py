"""babeld 1.12.1 control lines for the parser's tests: the `add` lines as BABELD.md records
them (its elided addresses written out), the `change` and `flush` lines transcribed in
their shape."""

from babbler.core.babeld_lines import TableLine, parse_line
from babbler.core.table import MeshTable

RECORDED = [
    "add interface v1x2 up true ipv6 fe80::a442:d9ff:feb1:c043",
    "add neighbour 561fe7d982e0 address fe80::e041:5dff:fecc:98a1 if v1x2 reach f800 "
    "ureach 0000 rxcost 96 txcost 96 cost 96",
    "change neighbour 561fe7d982e0 address fe80::e041:5dff:fecc:98a1 if v1x2 reach ffff "
    "ureach 0000 rxcost 96 txcost 96 rtt 0.120 rttcost 0 cost 96",
    "add xroute fde0:20c6:1fa7:ffff:1:2:3:1/128-::/0 prefix fde0:20c6:1fa7:ffff:1:2:3:1/128 "
    "from ::/0 metric 0",
    "add route 561fe7d994c0 prefix fde0:20c6:1fa7:ffff:2::1/128 from ::/0 installed yes "
    "id 6c:f3:a1:86:c8:ca:f5:00 metric 96 refmetric 0 via fe80::e041:5dff:fecc:98a1 if v1x2",
    "flush route 561fe7d994c0 prefix fde0:20c6:1fa7:ffff:2::1/128 from ::/0 installed no "
    "id 6c:f3:a1:86:c8:ca:f5:00 metric 65535 refmetric 0 via fe80::e041:5dff:fecc:98a1 if v1x2",
]


def table_of(*texts: str) -> MeshTable:
    """A mesh table made of these babeld lines."""
    table = MeshTable()
    for text in texts:
        line = parse_line(text)
        assert isinstance(line, TableLine)
        table.apply(line)
    return table

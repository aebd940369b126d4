"""Who is on the other end of a loopback connection: the user that owns the client's socket.

Every server of a run listens on 127.0.0.1 (the grader, the meter) and serves only the user the
run is theirs. The grader's URL carries a per-run secret, but a URL leaks: an
agent that follows its prompt's own ``curl $GRADING_SERVER_URL/submit`` example puts it on a
command line, where any local user reads it with ``ps``. So the grader also asks the kernel who
owns the connecting socket, and serves only the user it runs as. Loopback TCP has no
SO_PEERCRED, but the client's socket is a row of ``/proc/net/tcp`` (or ``tcp6``) whose local
address is the peer's and whose remote address is ours, and that row carries its owner's uid
(the identd method). An agent in the bubblewrap sandbox is the same user as the grader (its
user namespace maps the uid to itself), so it keeps the AutoRL-Bench contract unchanged.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def _hex_address(host: str, port: int, family: int) -> str:
    """An address as ``/proc/net/tcp*`` writes it: each 32-bit word of the address as the machine
    holds it in memory (``%08X``), then the port."""
    packed = ipaddress.ip_address(host).packed
    if family == socket.AF_INET6 and len(packed) == 4:  # an IPv4 peer seen on an IPv6 socket
        packed = ipaddress.IPv6Address(f"::ffff:{host}").packed
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the socket at ``client`` connected to ``server`` (both host, port); None if
    no such connection is found (it closed, or it is not on this host's loopback)."""
    for table, family in zip(TABLES, (socket.AF_INET, socket.AF_INET6)):
        try:
            local = _hex_address(client[0], client[1], family)
            remote = _hex_address(server[0], server[1], family)
            lines = table.read_text().splitlines()[1:]
        except (OSError, ValueError):
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[1] == local and fields[2] == remote:
                return int(fields[7])
    return None


def is_owner(client: tuple[str, int] | None, server: tuple[str, int] | None) -> bool:
    """True when the connection comes from a socket of the user this process runs as."""
    if client is None or server is None:
        return False
    return peer_uid(client, server) == os.getuid()

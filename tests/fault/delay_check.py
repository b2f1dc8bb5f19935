#!/usr/bin/env python3
"""Checks that netns_hosts.sh's links delay and deliver intact: started as
two "ranks" on two namespaced hosts, rank 1 makes TCP round trips of 8 bytes
to rank 0 and sends it 4 MiB of numbered bytes, which rank 0 checks and
acknowledges with their SHA-256.

    netns_hosts.sh -S -H 2 -L 1 -d 5ms -- delay_check.py 5000

Fails (exit 1, saying what it saw) when a round trip takes less than twice
the one-way delay given in microseconds, when the median round trip exceeds
it by more than 200 ms (a switch that stalls), or when the bytes arrive
changed. The port is the one after TIDAL_COMM_ID's, so it never meets a
Tidal job's bootstrap."""
import hashlib
import os
import socket
import statistics
import sys
import time

ROUND_TRIPS = 20
BULK = 4 << 20


def fail(text):
    print(f"delay_check rank {os.environ['TIDAL_RANK']}: FAIL: {text}", file=sys.stderr)
    sys.exit(1)


def recv_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        piece = sock.recv(n - len(data))
        if not piece:
            fail(f"connection closed after {len(data)} of {n} bytes")
        data += piece
    return bytes(data)


def bulk_bytes():
    return bytes(i * 7 % 251 for i in range(BULK))


def main():
    delay_us = int(sys.argv[1])
    host, port = os.environ["TIDAL_COMM_ID"].rsplit(":", 1)
    address = (host, int(port) + 1)
    rank = int(os.environ["TIDAL_RANK"])
    if rank == 0:
        server = socket.create_server(address)
        server.settimeout(30)
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(ROUND_TRIPS):
            conn.sendall(recv_exact(conn, 8))
        digest = hashlib.sha256(recv_exact(conn, BULK)).digest()
        conn.sendall(digest)
        return
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = socket.create_connection(address, timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                fail(f"cannot connect to {address}")
            time.sleep(0.05)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    trips = []
    for i in range(ROUND_TRIPS):
        start = time.perf_counter()
        conn.sendall(i.to_bytes(8, "little"))
        if recv_exact(conn, 8) != i.to_bytes(8, "little"):
            fail(f"round trip {i} came back changed")
        trips.append((time.perf_counter() - start) * 1e6)
    payload = bulk_bytes()
    conn.sendall(payload)
    if recv_exact(conn, 32) != hashlib.sha256(payload).digest():
        fail(f"{BULK} bytes arrived changed")
    low, median = min(trips), statistics.median(trips)
    print(f"delay_check: round trip {low:.0f} us at least, {median:.0f} us median "
          f"({2 * delay_us} us of delay); {BULK} bytes intact")
    if low < 2 * delay_us:
        fail(f"a round trip took {low:.0f} us, less than the {2 * delay_us} us of delay")
    if median > 2 * delay_us + 200000:
        fail(f"the median round trip took {median:.0f} us, far beyond {2 * delay_us} us")


if __name__ == "__main__":
    main()

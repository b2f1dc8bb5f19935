"""Starts N ranks of tests/torch/worker.py as separate processes, as torchrun
would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and collects what each
wrote. Imported by the test files; each rank's stdout/stderr is kept for the
failure message."""

import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _bindable(port):
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False


_given = set()


def free_port():
    # Tidal's rendezvous listens on MASTER_PORT + 1 under torchrun-style
    # variables (TIDAL_MASTER_PORT_OFFSET): pick a port whose successor is free too.
    # Drawn at random below the kernel's ephemeral range, as tidalrun does: a
    # port from bind(0) can be taken by any connect() on the host before the
    # rank binds it (torch_groups failed so, beside other tests), and two
    # calls here must not return the same port.
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200):
        if low > 11000:
            port = rng.randrange(10000, low - 1)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        if {port, port + 1} & _given:
            continue
        if _bindable(port) and _bindable(port + 1):
            _given.update({port, port + 1})
            return port
    raise RuntimeError("no free port pair")


class Ranks:
    def __init__(self, results, outputs, codes, elapsed):
        self.results = results  # per rank: the JSON the worker wrote, or None
        self.outputs = outputs  # per rank: stdout + stderr
        self.codes = codes
        self.elapsed = elapsed

    def log(self):
        return "\n".join(f"--- rank {r} (exit {c}) ---\n{o}"
                         for r, (c, o) in enumerate(zip(self.codes, self.outputs)))


def run(case, nprocs, timeout=120, args=(), env=None, expect_ok=True):
    """Runs worker.py CASE ARGS on nprocs ranks; returns Ranks. With expect_ok,
    every rank must exit 0."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tidal-torch-") as tmp:
        procs = []
        start = time.monotonic()
        for rank in range(nprocs):
            e = dict(os.environ)
            e.update({
                "RANK": str(rank), "WORLD_SIZE": str(nprocs), "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(nprocs), "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "TIDAL_TEST_OUT": tmp, "OMP_NUM_THREADS": "1",
            })
            e.update(env or {})
            preload = os.environ.get("TIDAL_TEST_PRELOAD")
            if preload:  # a native stack if std::terminate ends the rank
                e["LD_PRELOAD"] = " ".join(filter(None, [e.get("LD_PRELOAD"), preload]))
            procs.append(subprocess.Popen(
                [sys.executable, WORKER, case, *map(str, args)], env=e,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outputs, codes = [], []
        deadline = start + timeout
        for p in procs:
            try:
                out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                out, _ = p.communicate()
                out += f"\n[launch.py: killed after {timeout} s]"
            outputs.append(out)
            codes.append(p.returncode)
        elapsed = time.monotonic() - start
        results = []
        for rank in range(nprocs):
            path = os.path.join(tmp, f"rank{rank}.json")
            if os.path.exists(path):
                with open(path) as f:
                    results.append(json.load(f))
            else:
                results.append(None)
    ranks = Ranks(results, outputs, codes, elapsed)
    if expect_ok:
        assert codes == [0] * nprocs, ranks.log()
    return ranks

#!/usr/bin/env python3
"""tidal vs gloo as torch.distributed backends, side by side in one run:

  1. all_reduce of a 100 MB float32 tensor (SUM), time per call and bus bandwidth;
  2. one DDP training step of a 25M-parameter MLP (1024-4096-4096-1024, batch 32
     per rank, 1 thread per rank).

    /usr/bin/python3 benchmarks/torch/compare.py [--nprocs 2 4] [--iters 5] [--repeat 3]

Each (ranks, backend) pair is a fresh set of processes on this host (RANK,
WORLD_SIZE, MASTER_ADDR/PORT as torchrun sets them). Needs tidal_torch
importable (PYTHONPATH=build/python, or cmake --install). Prints which BLAS
torch loaded: Debian's torch uses the reference BLAS unless an optimised one
(libopenblas0-pthread) is installed.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def blas_loaded():
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower() and ".so" in line}
    return sorted(os.path.realpath(p) for p in libs) or ["(none found)"]


def rank_main(args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if args.backend == "tidal":
        import tidal_torch  # noqa: F401
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {"blas": blas_loaded()}

    # 1. all_reduce, 100 MB.
    t = torch.ones(args.mbytes * 1000 * 1000 // 4)
    for _ in range(2):
        dist.all_reduce(t)
    times = []
    for _ in range(args.iters):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - start)
    out["allreduce_s"] = sorted(times)[len(times) // 2]
    del t

    # 2. DDP step of the MLP.
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024))
    out["params"] = sum(p.numel() for p in model.parameters())
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x, y = torch.randn(32, 1024), torch.randn(32, 1024)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()

    for _ in range(2):
        step()
    times = []
    for _ in range(args.iters):
        dist.barrier()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    out["ddp_step_s"] = sorted(times)[len(times) // 2]
    # Compute alone: the same step without communication (no DDP), for scale.
    opt2 = torch.optim.SGD(model.parameters(), lr=1e-3)
    times = []
    for _ in range(args.iters):
        start = time.perf_counter()
        opt2.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt2.step()
        times.append(time.perf_counter() - start)
    out["compute_s"] = sorted(times)[len(times) // 2]
    dist.barrier()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(out, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(nprocs, backend, args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank0.json")
        port = free_port()
        procs = []
        for rank in range(nprocs):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(nprocs), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--rank", "--backend", backend, "--out", out,
                 "--iters", str(args.iters), "--mbytes", str(args.mbytes)], env=env))
        codes = [p.wait() for p in procs]
        if codes != [0] * nprocs:
            raise SystemExit(f"{backend} with {nprocs} ranks failed: exit codes {codes}")
        with open(out) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, nargs="+", default=[2, 4])
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3, help="runs of each pair; the best is kept")
    p.add_argument("--mbytes", type=int, default=100, help="all_reduce size in MB (10^6 bytes)")
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", default="tidal", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank:
        rank_main(args)
        return
    with open("/proc/loadavg") as f:
        print(f"host: {os.cpu_count()} CPUs, load average {f.read().split()[0]} at start")
    # Each repeat runs every (ranks, backend) pair once, alternating, and each
    # number keeps its best repeat: noise on a shared machine only adds time.
    best = {}
    for _ in range(args.repeat):
        for n in args.nprocs:
            for b in ("tidal", "gloo"):
                res = launch(n, b, args)
                old = best.setdefault((n, b), res)
                for key in ("allreduce_s", "ddp_step_s", "compute_s"):
                    old[key] = min(old[key], res[key])
    rows = [(n, {b: best[(n, b)] for b in ("tidal", "gloo")}) for n in args.nprocs]
    print(f"torch BLAS: {', '.join(rows[0][1]['tidal']['blas'])}")
    print(f"MLP parameters: {rows[0][1]['tidal']['params']:,}")
    print()
    print(f"all_reduce {args.mbytes} MB float32 (median of {args.iters}, best of {args.repeat} runs), "
          "bus bandwidth "
          "2(n-1)/n x bytes / time")
    print("ranks | tidal ms | tidal GB/s | gloo ms | gloo GB/s | gloo/tidal time")
    for n, res in rows:
        b = args.mbytes * 1e6 * 2 * (n - 1) / n
        t, g = res["tidal"]["allreduce_s"], res["gloo"]["allreduce_s"]
        print(f"{n:5d} | {t * 1e3:8.1f} | {b / t / 1e9:10.2f} | {g * 1e3:7.1f} | "
              f"{b / g / 1e9:9.2f} | {g / t:6.2f}x")
    print()
    print(f"DDP step, MLP 1024-4096-4096-1024, batch 32 per rank (median of {args.iters}, "
          f"best of {args.repeat} runs)")
    print("ranks | tidal ms | gloo ms | tidal/gloo | compute alone ms")
    for n, res in rows:
        t, g = res["tidal"]["ddp_step_s"], res["gloo"]["ddp_step_s"]
        c = res["tidal"]["compute_s"]
        print(f"{n:5d} | {t * 1e3:8.1f} | {g * 1e3:7.1f} | {t / g:10.2f} | {c * 1e3:8.1f}")
    with open("/proc/loadavg") as f:
        print(f"\nload average {f.read().split()[0]} at the end")


if __name__ == "__main__":
    main()

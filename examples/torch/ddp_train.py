"""Trains a small MLP with DistributedDataParallel on the tidal (or gloo)
backend. Run under torchrun, 4 ranks on this host:

    /usr/bin/python3 -m torch.distributed.run --nproc_per_node=4 --redirects 1 --tee 1 \\
        examples/torch/ddp_train.py --backend tidal

(--redirects 1 --tee 1 work around Debian 12's torchrun, which fails on Python 3.11 with
its defaults; docs/torch.md). Every rank trains on its own shard of a synthetic regression
task; rank 0 prints the loss averaged over the ranks.
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["tidal", "gloo"], default="tidal")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args()

    if args.backend == "tidal":
        import tidal_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(args.backend)  # env:// from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)

    # The task: y = tanh(x @ w / 8) for a fixed random w; each rank draws its own samples.
    torch.manual_seed(0)
    w_true = torch.randn(64, 8)
    model = torch.nn.Sequential(torch.nn.Linear(64, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 8))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + rank)

    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch, 64, generator=gen)
        y = torch.tanh(x @ w_true / 8)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == 1 or step == args.steps:
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            if rank == 0:
                print(f"step {step:4d}  loss {mean.item() / world:.5f}", flush=True)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(f"{args.backend}: {world} ranks, {args.steps} steps, "
              f"{1000 * elapsed / args.steps:.2f} ms/step", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

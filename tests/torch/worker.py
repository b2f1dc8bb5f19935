"""One rank of a tests/torch case (started by launch.py). Each case writes its
findings to $TIDAL_TEST_OUT/rank<R>.json; the test files check them."""

import faulthandler
import json
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import tidal_torch  # noqa: F401  (registers "tidal")

RANK = int(os.environ["RANK"])
VERBOSE = os.environ.get("TIDAL_TEST_VERBOSE") == "1"
WORLD = int(os.environ["WORLD_SIZE"])


def write(result):
    with open(os.path.join(os.environ["TIDAL_TEST_OUT"], f"rank{RANK}.json"), "w") as f:
        json.dump(result, f)


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool]
R = dist.ReduceOp
OP_NAMES = {R.SUM: "SUM", R.PRODUCT: "PRODUCT", R.MIN: "MIN", R.MAX: "MAX", R.AVG: "AVG",
            R.BAND: "BAND", R.BOR: "BOR", R.BXOR: "BXOR"}


def values(rank, numel, dtype, small=False, salt=0):
    """Rank's input: small integers, so every sum and product is exact in
    every dtype and the result cannot depend on the order of reduction."""
    i = torch.arange(numel, dtype=torch.int64)
    if dtype == torch.bool:
        return ((i * 3 + rank + salt) % 3 == 0)
    v = ((i * 7 + rank * 3 + salt) % (2 if small else 5)) + 1
    return v.to(dtype)


def close(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        return torch.allclose(a.double(), b.double(), rtol=1e-2 if a.element_size() == 2 else 1e-6)
    return torch.equal(a, b)


def reference_reduce(op, numel, dtype, small):
    xs = [values(r, numel, dtype, small) for r in range(WORLD)]
    if dtype == torch.bool:
        acc = xs[0].clone()
        for x in xs[1:]:
            if op in (R.SUM, R.MAX, R.BOR):
                acc = acc | x
            elif op in (R.PRODUCT, R.MIN, R.BAND):
                acc = acc & x
            else:
                acc = acc ^ x
        return acc
    wide = [x.double() if x.is_floating_point() else x.long() for x in xs]
    acc = wide[0].clone()
    for x in wide[1:]:
        if op in (R.SUM, R.AVG):
            acc = acc + x
        elif op == R.PRODUCT:
            acc = acc * x
        elif op == R.MIN:
            acc = torch.minimum(acc, x)
        elif op == R.MAX:
            acc = torch.maximum(acc, x)
        elif op == R.BAND:
            acc = acc & x
        elif op == R.BOR:
            acc = acc | x
        elif op == R.BXOR:
            acc = acc ^ x
    if op == R.AVG:
        acc = acc / WORLD if dtype.is_floating_point else torch.div(acc, WORLD, rounding_mode="floor")
    return acc.to(dtype)


class Checker:
    def __init__(self, tidal_group, gloo_group):
        self.tidal, self.gloo = tidal_group, gloo_group
        self.failures, self.vs_gloo, self.vs_reference = [], 0, 0

    def check(self, name, run, reference=None):
        """run(group) -> list of tensors (the result on this rank). Compared with
        gloo's run when gloo supports it, else with reference()."""
        if VERBOSE:
            print(name, flush=True)
        got = run(self.tidal)
        try:
            want = run(self.gloo)
            self.vs_gloo += 1
            source = "gloo"
        except RuntimeError:
            if reference is None:
                self.failures.append(f"{name}: gloo refused it and no reference")
                return
            want = reference()
            self.vs_reference += 1
            source = "reference"
        for k, (g, w) in enumerate(zip(got, want)):
            if not close(g, w):
                self.failures.append(f"{name}[{k}] vs {source}: got {g.tolist()} want {w.tolist()}")
        if len(got) != len(want):
            self.failures.append(f"{name}: {len(got)} results, {source} has {len(want)}")


def case_methods():
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    tidal_group = dist.new_group(backend="tidal")
    gloo_group = dist.new_group(backend="gloo")
    c = Checker(tidal_group, gloo_group)
    n = 2 * WORLD + 3  # not a multiple of anything in particular
    root = WORLD - 1
    for dtype in DTYPES:
        d = str(dtype).replace("torch.", "")
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
        if dtype != torch.bool:
            ops.append(R.AVG)
        if not dtype.is_floating_point:
            ops += [R.BAND, R.BOR, R.BXOR]
        for op in ops:
            small = op == R.PRODUCT
            tag = f"{d}/{OP_NAMES[op]}"

            def allreduce(g, op=op, small=small):
                t = values(RANK, n, dtype, small)
                dist.all_reduce(t, op=op, group=g)
                return [t]

            c.check(f"all_reduce {tag}", allreduce,
                    lambda op=op, small=small: [reference_reduce(op, n, dtype, small)])

            def reduce(g, op=op, small=small):
                t = values(RANK, n, dtype, small)
                dist.reduce(t, dst=root, op=op, group=g)
                return [t] if RANK == root else []

            c.check(f"reduce {tag}", reduce,
                    lambda op=op, small=small:
                    [reference_reduce(op, n, dtype, small)] if RANK == root else [])

            def reduce_scatter(g, op=op, small=small):
                full = values(RANK, n * WORLD, dtype, small)
                out = torch.zeros(n, dtype=dtype)
                dist.reduce_scatter(out, list(full.chunk(WORLD)), op=op, group=g)
                return [out]

            def reduce_scatter_ref(op=op, small=small):
                return [reference_reduce(op, n * WORLD, dtype, small).chunk(WORLD)[RANK]]

            c.check(f"reduce_scatter {tag}", reduce_scatter, reduce_scatter_ref)

            def reduce_scatter_base(g, op=op, small=small):
                out = torch.zeros(n, dtype=dtype)
                dist._reduce_scatter_base(out, values(RANK, n * WORLD, dtype, small), op=op,
                                          group=g)
                return [out]

            c.check(f"_reduce_scatter_base {tag}", reduce_scatter_base, reduce_scatter_ref)

        def coalesced(g):
            ts = [values(RANK, n, dtype), values(RANK, 3, dtype).reshape(3, 1)]
            dist.all_reduce_coalesced(ts, group=g)
            return ts

        c.check(f"all_reduce_coalesced {d}", coalesced,
                lambda: [reference_reduce(R.SUM, n, dtype, False),
                         reference_reduce(R.SUM, 3, dtype, False).reshape(3, 1)])

        def noncontig_allreduce(g):
            base = values(RANK, 4 * 3, dtype).reshape(4, 3)
            t = base.t()  # not contiguous
            dist.all_reduce(t, group=g)
            return [t.contiguous()]

        c.check(f"all_reduce non-contiguous {d}", noncontig_allreduce,
                lambda: [reference_reduce(R.SUM, 12, dtype, False).reshape(4, 3).t().contiguous()])

        def broadcast(g):
            t = values(RANK, n, dtype).reshape(1, n).expand(2, n).clone().t()  # non-contiguous
            dist.broadcast(t, src=root, group=g)
            return [t.contiguous()]

        c.check(f"broadcast {d}", broadcast,
                lambda: [values(root, n, dtype).reshape(1, n).expand(2, n).t().contiguous()])

        def all_gather(g):
            outs = [torch.zeros(n, dtype=dtype) for _ in range(WORLD)]
            dist.all_gather(outs, values(RANK, n, dtype), group=g)
            return outs

        c.check(f"all_gather {d}", all_gather,
                lambda: [values(r, n, dtype) for r in range(WORLD)])

        def all_gather_base(g):
            out = torch.zeros(WORLD * n, dtype=dtype)
            dist._all_gather_base(out, values(RANK, n, dtype), group=g)
            return [out]

        c.check(f"_all_gather_base {d}", all_gather_base,
                lambda: [torch.cat([values(r, n, dtype) for r in range(WORLD)])])

        def all_gather_coalesced(g):
            ins = [values(RANK, n, dtype), values(RANK, 4, dtype, salt=1).reshape(2, 2)]
            outs = [[torch.zeros(n, dtype=dtype), torch.zeros(2, 2, dtype=dtype)]
                    for _ in range(WORLD)]
            dist.all_gather_coalesced(outs, ins, group=g)
            return [t for per_rank in outs for t in per_rank]

        c.check(f"all_gather_coalesced {d}", all_gather_coalesced,
                lambda: [t for r in range(WORLD)
                         for t in (values(r, n, dtype), values(r, 4, dtype, salt=1).reshape(2, 2))])

        def gather(g):
            outs = [torch.zeros(n, dtype=dtype) for _ in range(WORLD)] if RANK == root else None
            dist.gather(values(RANK, n, dtype), outs, dst=root, group=g)
            return outs if RANK == root else []

        c.check(f"gather {d}", gather,
                lambda: [values(r, n, dtype) for r in range(WORLD)] if RANK == root else [])

        def scatter(g):
            out = torch.zeros(n, dtype=dtype)
            ins = [values(r, n, dtype, salt=5) for r in range(WORLD)] if RANK == 0 else None
            dist.scatter(out, ins, src=0, group=g)
            return [out]

        c.check(f"scatter {d}", scatter, lambda: [values(RANK, n, dtype, salt=5)])

        def alltoall_single(g):
            inp = values(RANK, WORLD * 3, dtype)
            out = torch.zeros(WORLD * 3, dtype=dtype)
            dist.all_to_all_single(out, inp, group=g)
            return [out]

        c.check(f"all_to_all_single {d}", alltoall_single,
                lambda: [torch.cat([values(r, WORLD * 3, dtype).chunk(WORLD)[RANK]
                                    for r in range(WORLD)])])

        # Uneven: rank r sends (p + r) % 3 + 1 rows of 2 to rank p.
        def rows(src, dst):
            return (dst + src) % 3 + 1

        def alltoall_splits(g):
            in_splits = [rows(RANK, p) for p in range(WORLD)]
            out_splits = [rows(q, RANK) for q in range(WORLD)]
            inp = values(RANK, 2 * sum(in_splits), dtype).reshape(-1, 2)
            out = torch.zeros(sum(out_splits), 2, dtype=dtype)
            dist.all_to_all_single(out, inp, out_splits, in_splits, group=g)
            return [out]

        def alltoall_splits_ref():
            parts = []
            for q in range(WORLD):
                inp = values(q, 2 * sum(rows(q, p) for p in range(WORLD)), dtype).reshape(-1, 2)
                parts.append(inp.split([rows(q, p) for p in range(WORLD)])[RANK])
            return [torch.cat(parts)]

        c.check(f"all_to_all_single splits {d}", alltoall_splits, alltoall_splits_ref)

        def alltoall_list(g):
            ins = [values(RANK, p + 1, dtype, salt=p) for p in range(WORLD)]
            outs = [torch.zeros(RANK + 1, dtype=dtype) for _ in range(WORLD)]
            dist.all_to_all(outs, ins, group=g)
            return outs

        c.check(f"all_to_all {d}", alltoall_list,
                lambda: [values(q, RANK + 1, dtype, salt=RANK) for q in range(WORLD)])

        def ring(g):
            # Every rank sends right and receives from the left at once (isend
            # before irecv on every rank), then the same leftwards, blocking.
            right, left = (RANK + 1) % WORLD, (RANK - 1) % WORLD
            got = torch.zeros(n, dtype=dtype)
            reqs = [dist.isend(values(RANK, n, dtype), right, group=g),
                    dist.irecv(got, left, group=g)]
            for r in reqs:
                r.wait()
            back = torch.zeros(n, dtype=dtype)
            if RANK % 2 == 0:
                dist.send(values(RANK, n, dtype, salt=2), left, group=g)
                dist.recv(back, right, group=g)
            else:
                dist.recv(back, right, group=g)
                dist.send(values(RANK, n, dtype, salt=2), left, group=g)
            # batch_isend_irecv: the same exchange, both directions in one batch.
            left_in, right_in = torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)
            ops = [dist.P2POp(dist.isend, values(RANK, n, dtype, salt=3), right, group=g),
                   dist.P2POp(dist.isend, values(RANK, n, dtype, salt=4), left, group=g),
                   dist.P2POp(dist.irecv, left_in, left, group=g),
                   dist.P2POp(dist.irecv, right_in, right, group=g)]
            for r in dist.batch_isend_irecv(ops):
                r.wait()
            return [got, back, left_in, right_in]

        if WORLD > 1:
            c.check(f"send/recv {d}", ring,
                    lambda: [values((RANK - 1) % WORLD, n, dtype),
                             values((RANK + 1) % WORLD, n, dtype, salt=2),
                             values((RANK - 1) % WORLD, n, dtype, salt=3),
                             values((RANK + 1) % WORLD, n, dtype, salt=4)])

    dist.barrier(group=tidal_group)
    write({"failures": c.failures, "vs_gloo": c.vs_gloo, "vs_reference": c.vs_reference})


def mlp(seed, sizes):
    torch.manual_seed(seed)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers[:-1])


def case_ddp(steps):
    """The same model trained with DDP on the tidal default group and on a
    gloo group, from the same weights on the same data."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("tidal", timeout=timedelta(seconds=60))
    gloo_group = dist.new_group(backend="gloo")
    sizes = [32, 64, 64, 8]
    losses = {}
    params = {}
    for name, group in (("tidal", None), ("gloo", gloo_group)):
        # Different initial weights on each rank: DDP's broadcast from rank 0
        # must make them equal.
        model = DDP(mlp(RANK, sizes), process_group=group, bucket_cap_mb=0.01)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(100 + RANK)
        curve = []
        for _ in range(int(steps)):
            x = torch.randn(16, sizes[0], generator=gen)
            y = torch.randn(16, sizes[-1], generator=gen)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            curve.append(loss.item())
        losses[name] = curve
        params[name] = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    # Every rank must end with the same weights: compare through gloo.
    gathered = [torch.zeros_like(params["tidal"]) for _ in range(WORLD)]
    dist.all_gather(gathered, params["tidal"], group=gloo_group)
    same_across_ranks = all(torch.equal(gathered[0], g) for g in gathered)
    write({"losses": losses, "same_across_ranks": same_across_ranks,
           "max_param_diff": (params["tidal"] - params["gloo"]).abs().max().item()})
    # Leave without finalizing the interpreter. gloo's worker thread may still
    # be dropping the all_gather's tensors, which takes the GIL; once Python is
    # finalizing, PyTorch 1.13 ends that thread with pthread_exit inside a
    # noexcept frame and the rank dies in std::terminate (CI, 2026-12-08:
    # ProcessGroupGloo::runLoop -> TensorImpl::destroy_pyobj_if_needed ->
    # PyEval_AcquireThread). The barrier (tidal) first: every rank has its
    # all_gather done, so no gloo bytes are still on their way to this one.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def case_groups(port):
    """new_group with odd subsets on a tidal default group made with tcp://."""
    dist.init_process_group("tidal", init_method=f"tcp://127.0.0.1:{port}", rank=RANK,
                            world_size=WORLD, timeout=timedelta(seconds=60))
    subsets = [[0, 2], [1, 2, 3], [3], [0, 1, 2, 3], [2, 1]]
    groups = [(ranks, dist.new_group(ranks=ranks)) for ranks in subsets]
    report = []
    for ranks, g in groups:
        if RANK not in ranks:
            continue
        members = sorted(ranks)
        t = torch.tensor([float(RANK + 1)])
        dist.all_reduce(t, group=g)
        b = torch.tensor([float(RANK)])
        dist.broadcast(b, src=members[-1], group=g)
        outs = [torch.zeros(1) for _ in members]
        dist.all_gather(outs, torch.tensor([float(RANK)]), group=g)
        report.append({"ranks": members, "size": dist.get_world_size(g),
                       "group_rank": dist.get_rank(g), "sum": t.item(), "bcast": b.item(),
                       "gathered": [o.item() for o in outs]})
    # Two groups at once: both in flight before either is waited for.
    g02 = groups[0][1]
    g_all = groups[3][1]
    works = []
    if RANK in (0, 2):
        x = torch.ones(1 << 16)
        works.append((x, 2.0, dist.all_reduce(x, group=g02, async_op=True)))
    y = torch.ones(1 << 16)
    works.append((y, float(WORLD), dist.all_reduce(y, group=g_all, async_op=True)))
    concurrent_ok = True
    for tensor, want, w in works:
        w.wait()
        concurrent_ok &= bool(torch.all(tensor == want))
    dist.barrier()
    write({"report": report, "concurrent_ok": concurrent_ok})


def case_killed(timeout_s):
    """The last rank dies; the others' next collective must raise in time."""
    timeout_s = float(timeout_s)
    init = "file://" + os.path.join(os.environ["TIDAL_TEST_OUT"], "init")
    dist.init_process_group("tidal", init_method=init, rank=RANK, world_size=WORLD,
                            timeout=timedelta(seconds=timeout_s))
    t = torch.ones(1 << 18)
    dist.all_reduce(t)
    dist.barrier()
    if RANK == WORLD - 1:
        os._exit(3)
    time.sleep(0.5)
    start = time.monotonic()
    result = {"raised": False}
    try:
        for _ in range(3):
            dist.all_reduce(t)
    except RuntimeError as e:
        result = {"raised": True, "message": str(e)}
    result["elapsed"] = time.monotonic() - start
    # The group stays broken: the next call fails at once too.
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        result["second_raised"] = False
    except RuntimeError as e:
        result["second_raised"] = True
        result["second_message"] = str(e)
    result["second_elapsed"] = time.monotonic() - start
    write(result)


def case_silent(timeout_s):
    """The last rank stays alive but never joins the collective: the others
    must fail after about the group's timeout, not hang."""
    timeout_s = float(timeout_s)
    dist.init_process_group("tidal", timeout=timedelta(seconds=timeout_s))
    dist.barrier()
    if RANK == WORLD - 1:
        time.sleep(timeout_s + 8)
        os._exit(0)
    start = time.monotonic()
    result = {"raised": False}
    try:
        dist.all_reduce(torch.ones(16))
    except RuntimeError as e:
        result = {"raised": True, "message": str(e)}
    result["elapsed"] = time.monotonic() - start
    write(result)
    os._exit(0)  # do not wait for the silent rank at exit


def expect_error(fn, *words):
    try:
        fn()
    except RuntimeError as e:
        text = str(e)
        missing = [w for w in words if w not in text]
        return {"raised": True, "message": text, "missing": missing}
    return {"raised": False, "message": "", "missing": list(words)}


def case_errors():
    """Mismatches across ranks and bad arguments raise RuntimeErrors that say
    what is wrong; the wait timeout of a Work; a group stays usable after a
    refused argument."""
    init = "file://" + os.path.join(os.environ["TIDAL_TEST_OUT"], "init")
    dist.init_process_group("tidal", init_method=init, rank=RANK, world_size=WORLD,
                            timeout=timedelta(seconds=30))
    out = {}
    # Refused before anything is sent: the group stays healthy.
    out["sparse"] = expect_error(
        lambda: dist.all_reduce(torch.eye(3).to_sparse()), "sparse")
    out["int16"] = expect_error(
        lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)), "Short", "not supported")
    out["bxor_float"] = expect_error(
        lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BXOR), "BXOR", "Float")
    out["avg_bool"] = expect_error(
        lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist.ReduceOp.AVG), "AVG", "bool")
    out["anysource"] = expect_error(lambda: dist.recv(torch.zeros(2)), "any source")
    out["allgather_size"] = expect_error(
        lambda: dist.all_gather([torch.zeros(3) for _ in range(WORLD)], torch.zeros(2)),
        "outputTensors[0][0]", "3 elements", "expected 2")
    out["split_sum"] = expect_error(
        lambda: dist.all_to_all_single(torch.zeros(4), torch.zeros(4), [1] * WORLD, [3] * WORLD),
        "split sizes add up to")
    t = torch.ones(4)
    dist.all_reduce(t)
    # (complex tensors reach the backend as float pairs: torch views them so)
    z = torch.full((3,), 1 + 2j, dtype=torch.complex64)
    dist.all_reduce(z)
    out["healthy_after_refusals"] = bool(torch.all(t == WORLD)) and bool(
        torch.all(z == WORLD * (1 + 2j)))
    # Wait with a timeout while the peer is late.
    if RANK == 0:
        x = torch.ones(8)
        w = dist.all_reduce(x, async_op=True)
        out["wait_timeout"] = expect_error(
            lambda: w.wait(timeout=timedelta(milliseconds=300)), "did not complete")
        w.wait()
        out["late_result_ok"] = bool(torch.all(x == WORLD))
    else:
        time.sleep(2)
        x = torch.ones(8)
        dist.all_reduce(x)
        out["wait_timeout"] = {"raised": True, "message": "", "missing": []}
        out["late_result_ok"] = bool(torch.all(x == WORLD))
    # Across ranks: each mismatch on a group of its own (it breaks the group).
    g = dist.new_group(backend="tidal")
    out["shape"] = expect_error(lambda: dist.all_reduce(torch.ones(4 + RANK), group=g),
                                "mismatch")
    g = dist.new_group(backend="tidal")
    dtype = torch.float32 if RANK == 0 else torch.int32
    out["dtype"] = expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=dtype), group=g),
                                "mismatch")
    g = dist.new_group(backend="tidal")
    out["op"] = expect_error(
        lambda: dist.all_reduce(torch.ones(4),
                                op=dist.ReduceOp.SUM if RANK == 0 else dist.ReduceOp.MAX, group=g),
        "mismatch")
    write(out)


CASES = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    # A rank ended by a signal (SIGABRT from std::terminate, SIGSEGV) prints
    # every Python thread's stack; a hung one shows where it hangs before
    # launch.py kills it.
    faulthandler.enable(all_threads=True)
    faulthandler.dump_traceback_later(float(os.environ.get("TIDAL_TEST_TRACEBACK_AFTER", "100")))
    CASES[sys.argv[1]](*sys.argv[2:])

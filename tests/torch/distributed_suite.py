"""PyTorch's own generic distributed suite (torch/testing/_internal/distributed/
distributed_test.py, shipped with python3-torch) run against the tidal backend,
the way a third-party backend plugs in: register it, declare it a "plugin"
(and a DDP-capable one), and subclass the test base with spawned ranks.

    BACKEND=tidal WORLD_SIZE=2 /usr/bin/python3 tests/torch/distributed_suite.py [-k PATTERN]

Each test starts WORLD_SIZE fresh processes (spawn), which import this module
again, so the registration below happens in every rank.
"""

import os
import sys

os.environ.setdefault("BACKEND", "tidal")
os.environ.setdefault("WORLD_SIZE", "2")
# The suite reads TEMP_DIR at import; setUp makes a fresh one per test.
os.environ.setdefault("TEMP_DIR", "/tmp")
# torch.testing's common_utils writes JUnit XML reports when CI is set (as it
# is in .ci/run), through xmlrunner, which Debian does not ship: the run would
# stop at the import. The spawned ranks inherit the environment without it.
os.environ.pop("CI", None)

import torch.distributed as dist  # noqa: E402

try:
    import expecttest  # noqa: F401
except ImportError:
    # torch.testing's common_utils derives its TestCase from expecttest's, a
    # small PyPI package Debian does not ship. The distributed suite uses none
    # of its inline-expectation asserts, so unittest's TestCase stands in.
    import types
    import unittest

    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase, ACCEPT=False)

import tidal_torch  # noqa: E402,F401  (registers "tidal")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if os.environ["BACKEND"] == tidal_torch.BACKEND:
    DistTestCases.backend_feature["plugin"].add(tidal_torch.BACKEND)
    DistTestCases.backend_feature["ddp"].add(tidal_torch.BACKEND)

# The suite's ranks turn on DDP's ReplicatedTensor mode, which imports
# torch.distributed._shard; Debian's torch 1.13 _shard does not import under
# Python 3.11 (a dataclass with a mutable default), whatever the backend. Keep
# DDP in its default mode.
import torch.nn.parallel._replicated_tensor_ddp_utils as _replicated  # noqa: E402

_replicated._set_ddp_with_replicated_tensor = lambda value: None

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


import functools  # noqa: E402
import unittest  # noqa: E402

# Tests of what the backend refuses by design (docs/torch.md), reported as
# skipped with the reason instead of failing.
REFUSED = {
    "test_send_recv_any_source": "recv from any source",
    "test_send_recv_any_source_autograd_profiler": "recv from any source",
    "test_send_recv_any_source_torch_profiler": "recv from any source",
}


# Of those, the tests that check what only the named backends do: gloo's
# monitored_barrier, and tests whose body builds its model only for the
# backends it names (an UnboundLocalError on any other).
NOT_FOR_TIDAL = {
    "test_monitored_barrier_gloo", "test_monitored_barrier_gloo_rank_0_timeout",
    "test_monitored_barrier_gloo_subgroup", "test_accumulate_gradients_no_sync",
    "test_accumulate_gradients_no_sync_allreduce_hook",
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook",
    "test_accumulate_gradients_no_sync_grad_is_view",
}


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


# The suite runs some CPU tests only for the backends it names ("Test
# requires backend to be one of {'gloo'}", "Only MPI supports CPU
# all_to_all_single", ...), though they test nothing particular to those
# backends. Tests skipped for one of these reasons run on tidal too.
NAMED_BACKEND_ONLY = (
    "Only MPI supports CPU all_to_all_single",
    "Only MPI supports all_to_all",
    "GLOO Batch Send Recv CPU",
    "get_future is only supported on mpi, nccl and gloo",
    "Only Nccl & Gloo backend support DistributedDataParallel",
)


def _run_anyway(test):
    @functools.wraps(test)
    def run(*args, **kwargs):
        return test(*args, **kwargs)

    run.__unittest_skip__ = False
    run.__unittest_skip_why__ = ""
    return run


def _named_backend_only(why):
    # "Test requires backend to be one of {'gloo', 'nccl'}": a set, printed in
    # an order that changes from run to run (string hashing is randomised).
    if why.startswith("Test requires backend to be one of {"):
        return "'gloo'" in why
    return why in NAMED_BACKEND_ONLY


if os.environ["BACKEND"] == tidal_torch.BACKEND:
    for _name in dir(TestDistBackendWithSpawn):
        _test = getattr(TestDistBackendWithSpawn, _name)
        if (_name.startswith("test_") and getattr(_test, "__unittest_skip__", False)
                and _named_backend_only(getattr(_test, "__unittest_skip_why__", ""))
                and _name not in NOT_FOR_TIDAL):
            setattr(TestDistBackendWithSpawn, _name, _run_anyway(_test))
    for _name, _what in REFUSED.items():
        setattr(TestDistBackendWithSpawn, _name, unittest.skip(
            f"the tidal backend refuses {_what} (docs/torch.md)")(
                getattr(TestDistBackendWithSpawn, _name)))


if __name__ == "__main__":
    assert dist.is_available()
    run_tests()

"""DDP on the tidal default group gives gloo's loss curve."""

import math

import pytest

import launch


@pytest.mark.parametrize("nprocs", [2, 4])
def test_ddp_matches_gloo(nprocs):
    steps = 15
    ranks = launch.run("ddp", nprocs, timeout=240, args=[steps])
    for rank, res in enumerate(ranks.results):
        assert res is not None, ranks.log()
        tidal, gloo = res["losses"]["tidal"], res["losses"]["gloo"]
        assert len(tidal) == steps and len(gloo) == steps
        for step, (a, b) in enumerate(zip(tidal, gloo)):
            # Sums of float32 gradients in another order: equal within rounding.
            assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6), (rank, step, tidal, gloo)
        assert res["same_across_ranks"], res
        assert res["max_param_diff"] < 1e-4, res

"""Every collective and point-to-point method x every dtype, on the tidal
backend against gloo's result on the same inputs (or, where gloo refuses the
call, against the result computed from every rank's inputs)."""

import pytest

import launch


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_methods_match_gloo(nprocs):
    ranks = launch.run("methods", nprocs, timeout=240)
    for rank, res in enumerate(ranks.results):
        assert res is not None, ranks.log()
        assert res["failures"] == [], f"rank {rank}: " + "\n".join(res["failures"])
        # 9 dtypes, each with at least all_reduce x 4 ops compared with gloo.
        assert res["vs_gloo"] >= 9 * 4 + 9 * 8, res

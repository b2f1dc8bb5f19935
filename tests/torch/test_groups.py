"""new_group with odd subsets (a single rank, non-contiguous ranks, an
unsorted list) on a tidal default group created with a tcp:// init method."""

import launch


def test_new_group_subsets():
    world = 4
    ranks = launch.run("groups", world, timeout=180, args=[launch.free_port()])
    subsets = [[0, 2], [1, 2, 3], [3], [0, 1, 2, 3], [1, 2]]
    for rank, res in enumerate(ranks.results):
        assert res is not None, ranks.log()
        seen = [entry["ranks"] for entry in res["report"]]
        assert seen == [s for s in subsets if rank in s], res
        for entry in res["report"]:
            members = entry["ranks"]
            assert entry["size"] == len(members)
            assert entry["group_rank"] == members.index(rank)
            assert entry["sum"] == sum(m + 1 for m in members)
            assert entry["bcast"] == members[-1]
            assert entry["gathered"] == [float(m) for m in members]
        assert res["concurrent_ok"], res

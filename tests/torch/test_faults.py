"""Failures: a killed rank, a rank that never joins, mismatched calls and bad
arguments all raise RuntimeErrors that say what happened, in bounded time."""

import launch


def test_killed_rank_makes_survivors_raise():
    timeout = 20
    ranks = launch.run("killed", 3, timeout=90, args=[timeout], expect_ok=False)
    assert ranks.codes[:2] == [0, 0], ranks.log()
    assert ranks.codes[2] == 3, ranks.log()
    for res in ranks.results[:2]:
        assert res is not None, ranks.log()
        assert res["raised"], res
        assert res["elapsed"] < timeout, res
        assert "rank" in res["message"] and "tidalAllReduce" in res["message"], res
        assert res["second_raised"] and res["second_elapsed"] < 5, res


def test_silent_rank_times_out():
    timeout = 4
    ranks = launch.run("silent", 2, timeout=90, args=[timeout], expect_ok=False)
    res = ranks.results[0]
    assert ranks.codes[0] == 0 and res is not None, ranks.log()
    assert res["raised"], res
    assert timeout - 1 <= res["elapsed"] < timeout + 10, res
    assert "TIDAL_TIMEOUT" in res["message"], res


def test_mismatches_and_bad_arguments_raise():
    ranks = launch.run("errors", 2, timeout=120)
    for rank, res in enumerate(ranks.results):
        assert res is not None, ranks.log()
        for name in ("sparse", "int16", "bxor_float", "avg_bool", "anysource", "allgather_size",
                     "split_sum", "wait_timeout", "shape", "dtype", "op"):
            assert res[name]["raised"], (rank, name, res[name])
            assert res[name]["missing"] == [], (rank, name, res[name])
        assert res["healthy_after_refusals"], res
        assert res["late_result_ok"], res

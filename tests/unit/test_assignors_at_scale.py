"""The assignors' properties at 20 workers x 2 000 tasks (200 connectors x 10), over
the rounds of ``bench/assignors.py`` (which measures them at 100 x 10 000, with
times): sticky and cooperative move nothing in a steady round and at most the
fewest moves + 5 % otherwise; the balanced ones stay within one; failover keeps
everything on one member and moves only when that member goes."""

from __future__ import annotations

import pytest

from eos.runtime.cluster.assignors import AssignorSettings, make_assignor
from tests.assignor_rounds import Cluster, RoundReport

ROUNDS = (("first", 0, 0), ("steady", 0, 0), ("1 lost", 1, 0), ("2 join", 0, 2), ("2 lost", 2, 0))


def rounds(name: str) -> dict[str, RoundReport]:
    cluster = Cluster(
        make_assignor(name, AssignorSettings()), workers=20, connectors=200, tasks_per_connector=10
    )
    return {r: cluster.rebalance(r, lose=lose, join=join) for r, lose, join in ROUNDS}


@pytest.mark.parametrize("name", ["sticky", "cooperative"])
def test_sticky_ones_move_nothing_when_steady_and_near_the_fewest_otherwise(name: str) -> None:
    reports = rounds(name)
    assert reports["steady"].moved == 0
    for report in reports.values():
        assert report.moved <= report.minimum * 1.05, report
        assert report.balanced, report


def test_sticky_moves_exactly_the_fewest() -> None:
    reports = rounds("sticky")
    assert [r.moved for r in reports.values()] == [r.minimum for r in reports.values()]
    assert reports["1 lost"].moved == 110  # the lost member's 10 connectors and 100 tasks
    # 21 members: each newcomer gets the smaller share of 200 connectors and 2 000 tasks
    assert reports["2 join"].moved == 2 * (200 // 21 + 2000 // 21)


def test_cooperative_holds_a_lost_members_work_and_hands_it_to_newcomers() -> None:
    reports = rounds("cooperative")
    assert (reports["1 lost"].moved, reports["1 lost"].held) == (0, 110)
    assert reports["2 join"].held == 0
    assert reports["2 join"].moved == reports["2 join"].minimum
    assert reports["2 lost"].held == reports["2 lost"].minimum


def test_round_robin_is_balanced_but_moves_most_of_the_work() -> None:
    reports = rounds("round-robin")
    assert all(r.balanced for r in reports.values())
    assert reports["steady"].moved == 0
    assert reports["1 lost"].moved > 10 * reports["1 lost"].minimum


def test_failover_keeps_everything_on_one_member() -> None:
    reports = rounds("failover")
    for report in reports.values():
        assert (report.connector_spread, report.task_spread) == (200, 2000)
        assert report.moved == report.minimum
    assert reports["2 join"].moved == 0  # newcomers rank below (same priority, larger ids)
    assert reports["1 lost"].moved == 2200  # the best member left: everything moves

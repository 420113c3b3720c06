"""The `policy` a discovery proposes: the smallest step of a recipe's arms and their highest knee, and no cap that a
ladder did not earn."""

from __future__ import annotations

from llmsweep.discover.analysis import min_step
from llmsweep.discover.model import ArmProposal, GridPoint, Knee
from llmsweep.discover.sweep import grid_policy


def _arm(key: str, concs: list[int], *, knee_next: int | None, error: str | None = None) -> ArmProposal:
    # a knee_next of None: throughput still rose at the top of the ladder, the knee was not reached (above it)
    knee = (Knee(conc=concs[-1] if knee_next else None, above=None if knee_next else concs[-1], next_conc=knee_next,
                 reason="r") if concs else None)
    return ArmProposal(arm=f"{key}:{concs}", recipe_key=key, path="p", label="l", original=[1],
                       proposed=[GridPoint(conc=c, why="w") for c in concs],
                       min_step=min_step(concs),
                       knee=knee, noise=[], curve=[], error=error)


def test_the_policy_takes_the_smallest_step_and_the_highest_knee_of_a_recipes_arms() -> None:
    policy = grid_policy([_arm("a", [1, 3, 6, 24], knee_next=32), _arm("a", [4, 8, 16], knee_next=32),
                          _arm("b", [2, 4], knee_next=8)])
    assert policy == {"a": (2, 24), "b": (2, 4)}


def test_no_cap_where_an_arm_still_rose_at_the_top_of_its_ladder_or_got_no_grid() -> None:
    rising = grid_policy([_arm("a", [1, 4, 64], knee_next=None), _arm("a", [4, 8, 16], knee_next=32)])
    assert rising == {"a": (3, None)}
    failed = grid_policy([_arm("a", [1, 4, 16], knee_next=32), _arm("a", [], knee_next=None, error="no valid run")])
    assert failed == {"a": (3, None)}
    assert grid_policy([_arm("a", [], knee_next=None, error="no valid run")]) == {}


def test_a_recipes_own_cap_below_the_proposed_grid_is_raised_to_its_top_and_left_alone_otherwise() -> None:
    # the knee not reached: the grid runs past the recipe's cap of 16, which would refuse every job above it
    assert grid_policy([_arm("a", [1, 4, 64], knee_next=None)], {"a": 16}) == {"a": (3, 64)}
    # a grid arm and one that got none (its recipe concurrencies stay): the cap covers both
    failed = _arm("a", [], knee_next=None, error="no valid run").model_copy(update={"original": [1, 128]})
    assert grid_policy([_arm("a", [1, 4, 64], knee_next=None), failed], {"a": 16}) == {"a": (3, 128)}
    assert grid_policy([_arm("a", [1, 4, 64], knee_next=None)], {"a": 64}) == {"a": (3, None)}
    assert grid_policy([_arm("a", [1, 4, 64], knee_next=None)], {"b": 16}) == {"a": (3, None)}
    assert grid_policy([_arm("a", [1, 4, 16], knee_next=32)], {"a": 64}) == {"a": (3, 16)}

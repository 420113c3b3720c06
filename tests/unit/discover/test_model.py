"""A discovery's knee is either reached (`conc`) or lies above the measured top (`above`), never both or neither:
a table never says `not reached (above None)`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from llmsweep.discover.model import Knee


def test_a_knee_is_reached_or_lies_above_exactly_one() -> None:
    assert Knee(conc=8, next_conc=16, reason="r").describe() == "conc 8"
    assert Knee(conc=None, above=64, next_conc=None, reason="r").describe() == "not reached (above 64)"
    for conc, above in ((None, None), (8, 64)):
        with pytest.raises(ValidationError, match=r"either reached \(conc\) or lies above the measured top"):
            Knee(conc=conc, above=above, next_conc=None, reason="r")

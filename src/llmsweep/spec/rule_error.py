"""A validator error that already knows its rule id, the field it concerns and the fix.

Model-level validators see the whole mapping, so pydantic reports their errors at the mapping's location. Carrying
the offending field name and the fix in the error context lets the loader point at the exact line and print
an actionable message, with the same rule ids everywhere.
"""

from __future__ import annotations

from pydantic_core import PydanticCustomError


def rule_error(rule: str, message: str, *, field: str | None = None, fix: str | None = None) -> PydanticCustomError:
    """Build an error for rule `schema.<rule>`; `field` is appended to the location, `fix` becomes the finding's fix.

    The message is passed through verbatim (pydantic only substitutes `{name}` for context keys, and our context
    keys are never written in messages).
    """
    ctx: dict[str, str] = {"rule": rule}
    if field is not None:
        ctx["field"] = field
    if fix is not None:
        ctx["fix"] = fix
    return PydanticCustomError(f"llmsweep.{rule}", message, ctx)

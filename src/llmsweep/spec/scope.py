"""The matrix a recipe file belongs to: the recipe files whose rows a plan's eval selection weighs.

InferenceX marks its eval rows over the whole matrix it generates, every master file together (`plan.evals`): which
concurrency of a configuration (model, runner, framework, precision, …) runs the eval is decided among all of that
configuration's rows, whichever file holds them. Here a recipe file inside a repository's `recipes/` folder belongs to
that folder's matrix — the files `changes` compares when none are named, and `ci matrix recipes` plans for the CI
workflow —, so every command that plans it (`run`, `changes`, `ci matrix`, `validate`, `render`, `matrix`) marks the
rows that matrix marks, and plans only the files it was handed. A file outside such a folder (`examples/`, a copy in
`/tmp`) is weighed with the files handed beside it alone. This module is the one home of that file set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llmsweep.spec.loader import load_recipes, recipe_files
from llmsweep.spec.recipe import Recipe

RECIPES_DIR = "recipes"
"""The folder at the top of a repository (or of a tree a change compares) that holds its matrix of recipes."""


def matrix_folders(named: Sequence[Path], *, root: Path | None = None) -> list[Path]:
    """The `recipes/` folders the named recipe files (or folders of them) belong to, each once: `root/recipes` for a
    path inside it when `root` is the tree they are read in (a side of a change), else the `recipes/` folder at the
    top of the git work tree holding the path (the folder beside its `.git`). A path inside none belongs to none."""
    out: list[Path] = []
    for path in named:
        where = path.resolve()
        if root is not None:
            top = (root / RECIPES_DIR).resolve()
            folder = top if where.is_relative_to(top) else None
        else:
            folder = next((a for a in (where, *where.parents)
                           if a.name == RECIPES_DIR and (a.parent / ".git").exists()), None)
        if folder is not None and folder not in out:
            out.append(folder)
    return out


def matrix_files(named: Sequence[Path], *, root: Path | None = None) -> list[Path] | None:
    """Every recipe file of the matrix the named ones belong to (:func:`matrix_folders`), in the order that matrix is
    planned: each folder's files as every command walks a folder (`spec.loader.recipe_files`), then the named files
    no folder holds, in the order given. None when that is the named files themselves: nothing beside them to weigh
    (no folder holds one of them — see :func:`weighed_alone` —, or they are the whole folder)."""
    folders = matrix_folders(named, root=root)
    if not folders:
        return None
    given = recipe_files(named)
    inside = recipe_files(folders)
    seen = {p.resolve() for p in inside}
    files = inside + [p for p in given if p.resolve() not in seen]
    return None if {p.resolve() for p in files} <= {p.resolve() for p in given} else files


def load_matrix(named: Sequence[Path], *, root: Path | None = None) -> dict[str, Recipe] | None:
    """The recipes of :func:`matrix_files`, keyed in the matrix's order; a file there that does not load weighs none
    of its recipes (its own command — `validate`, or `run` of it — says why). None as :func:`matrix_files` says."""
    files = matrix_files(named, root=root)
    return None if files is None else dict(load_recipes(files).recipes)


def weighed_alone(named: Sequence[Path], *, root: Path | None = None) -> bool:
    """Whether the named files are a matrix by themselves: no repository's `recipes/` folder holds any of them."""
    return not matrix_folders(named, root=root)


def alone_note(named: Sequence[Path]) -> str:
    """What a command that planned eval rows of files :func:`weighed_alone` says of them."""
    files = ", ".join(str(p) for p in named) or "the files given"
    return (f"eval points were chosen among the rows of {files} alone: no repository's {RECIPES_DIR}/ folder holds "
            f"them, so no other recipe file's rows of the same configuration were weighed (a file inside a "
            f"repository's {RECIPES_DIR}/ is weighed with every recipe there, as `llmsweep changes` and the CI "
            "workflow plan them)")

"""The matrix a recipe file belongs to: the recipe files whose rows a plan's eval selection weighs.

InferenceX marks its eval rows over the whole matrix it generates, every master file together (`plan.evals`): which
concurrency of a configuration (model, runner, framework, precision, …) runs the eval is decided among all of that
configuration's rows, whichever file holds them. Here a recipe file inside a repository's `recipes/` folder belongs to
that folder's matrix — the files `changes` compares when none are named, and `ci matrix recipes` plans for the CI
workflow —, so every command that plans it (`run`, `changes`, `ci matrix`, `validate`, `render`, `matrix`) marks the
rows that matrix marks, and plans only the files it was handed. A file outside such a folder (`examples/`, a copy in
`/tmp`) is weighed with the files handed beside it alone. This module is the one home of that file set. A file or
recipe of the folder that does not load or plan weighs nothing, and is said where eval rows were chosen without it
(:class:`Matrix`, warning :data:`UNWEIGHED_RULE`); a configuration whose eval the folder moves out of the files a
command plans is said too (:class:`MovedEval`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmsweep.findings import Finding, Severity
from llmsweep.spec.loader import load_recipes, recipe_files
from llmsweep.spec.recipe import Recipe
from llmsweep.words import count_of

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


UNWEIGHED_RULE = "plan.matrix-unweighed"
"""The warning that names a file or recipe of the matrix eval rows were chosen without (:class:`Matrix`)."""


@dataclass(frozen=True)
class MovedEval:
    """A configuration whose eval the planned files alone had run on a row of theirs, and which the matrix plans on
    another file's rows instead (`plan.evals.moved_evals`): a plan of the files runs no eval of it."""

    configuration: str
    """The configuration, as the planned files' recipe has it (`small-sim (Qwen/… fp8 sglang on mi300x, 8k1k)`)."""
    at: tuple[tuple[str, int], ...]
    """Where the matrix plans its eval: (the file, as the repository names it, e.g. `recipes/big.yaml`; conc)."""

    def note(self) -> str:
        """`note: the eval of X is planned at conc 64 and 256 in recipes/big.yaml (…)`: what `run FILE` says."""
        files = list(dict.fromkeys(f for f, _ in self.at))
        where = " and ".join(
            f"conc {' and '.join(str(c) for f, c in self.at if f == file)} in {file}" for file in files)
        return (f"note: the eval of {self.configuration} is planned at {where} (eval rows are chosen across "
                f"{RECIPES_DIR}/, the matrix the planned files belong to)")


@dataclass
class Matrix:
    """The recipes of the matrix the planned files belong to (:func:`load_matrix`), keyed in the matrix's order,
    among whose rows a full sweep marks its eval rows (`plan.plan_jobs`); and what the plans of it found, each once:
    `left_out`, a :data:`UNWEIGHED_RULE` warning per file or recipe of it eval rows were chosen without (it does not
    load, or does not plan), and `moved`, the configurations whose eval the matrix moved out of the planned files."""

    recipes: dict[str, Recipe]
    folders: list[Path]
    left_out: list[Finding] = field(default_factory=list)
    moved: list[MovedEval] = field(default_factory=list)

    def leave_out(self, file: str | None, line: int | None, path: str | None, why: str, *,
                  loads: bool = True, more: int = 0) -> None:
        """Record that eval rows were chosen without the recipe at `path` (a whole file: None) of `file`, for `why`
        (the loader's or the planner's message); `loads`: False where it does not load, True where it does not plan;
        `more`: how many more findings the loader had of it."""
        if any(f.file == file and f.path == path for f in self.left_out):
            return
        what = ("this file" if path is None else "this recipe") + (" (it does not load" if not loads
                                                                   else " (it does not plan")
        also = f"; {count_of(more, 'more finding')}" if more else ""
        self.left_out.append(Finding(
            rule=UNWEIGHED_RULE, severity=Severity.WARNING, file=file, line=line, path=path,
            message=f"eval rows were chosen across {RECIPES_DIR}/, the matrix the planned files belong to, without "
                    f"{what}: {why}{also})",
            fix=f"fix it (`llmsweep validate {file}` lists why): until then a configuration's eval may stand at "
                f"another point here than in a plan of the whole {RECIPES_DIR}/ folder"))

    def move(self, moved: MovedEval) -> None:
        if moved not in self.moved:
            self.moved.append(moved)

    def shown(self, file: str) -> str:
        """`file` as its repository names it (`recipes/big.yaml`: relative to the top above its matrix folder)."""
        where = Path(file).resolve()
        for folder in self.folders:
            if where.is_relative_to(folder):
                return where.relative_to(folder.parent).as_posix()
        return file


def load_matrix(named: Sequence[Path], *, root: Path | None = None) -> Matrix | None:
    """The recipes of :func:`matrix_files`; a file there that does not load weighs none of its recipes, and is a
    warning of the matrix (:meth:`Matrix.leave_out`, its first finding's message) unless it is a named file (the
    command's own loading says why). None as :func:`matrix_files` says."""
    files = matrix_files(named, root=root)
    if files is None:
        return None
    loaded = load_recipes(files)
    matrix = Matrix(dict(loaded.recipes), matrix_folders(named, root=root))
    given = {p.resolve() for p in recipe_files(named)}
    kept = {Path(r.file).resolve() for r in loaded.recipes.values()}
    by_file: dict[str, list[Finding]] = {}
    for f in loaded.errors:
        if f.file is None or Path(f.file).resolve() in given:
            continue
        if f.path is not None and any(f.path == k or f.path.startswith(k + ".") for k in loaded.recipes):
            continue  # its recipe loaded (a finding the loader keeps it with): weighed
        if f.path is None and Path(f.file).resolve() in kept:
            continue
        by_file.setdefault(f.file, []).append(f)
    for file, found in by_file.items():
        first = found[0]
        whole = Path(file).resolve() not in kept
        matrix.leave_out(file, first.line, None if whole else first.path, first.message, loads=False,
                         more=len(found) - 1)
    return matrix


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

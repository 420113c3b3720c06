"""The prompt set a golden-AL collection sends: SPEED-Bench rows from a local file, one category, first turns; the
builtin coding set as the offline stand-in, labelled as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.alcollect.prompts import BUILTIN, hub_prompt_rows, load_prompts, sent_digest
from llmsweep.errors import DatasetError


def _rows(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_local_speed_bench_file_gives_its_category_in_order(tmp_path: Path) -> None:
    path = _rows(tmp_path / "speed.jsonl", [
        {"question_id": "a", "category": "coding", "turns": ["write a sort"], "multiturn": False, "difficulty": "x"},
        {"question_id": "b", "category": "math", "turns": ["2+2"]},
        {"question_id": "c", "category": "coding", "turns": ["fix this", "now test it"], "multiturn": True},
    ])
    prompts = load_prompts(str(path), "coding")
    assert [p.question_id for p in prompts.prompts] == ["a", "c"]
    digest = sent_digest(["write a sort", "fix this"])  # the first turns: what is sent
    assert prompts.describe(2) == f"coding ({path}, 2 prompts; first turn of 1 multi-turn rows, sha256 {digest})"
    assert [p.question_id for p in load_prompts(str(path), "coding", limit=1).prompts] == ["a"]


def test_a_missing_category_names_the_ones_there(tmp_path: Path) -> None:
    path = _rows(tmp_path / "speed.jsonl", [{"category": "math", "turns": ["2+2"]}])
    with pytest.raises(DatasetError, match=r"no `coding` rows \(it has: math\)"):
        load_prompts(str(path), "coding")


def test_a_malformed_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "speed.jsonl"
    path.write_text('{"category": "coding", "turns": ["ok"]}\n{"category": "coding", "turns": []}\n')
    with pytest.raises(DatasetError, match=r"speed\.jsonl:2: not a SPEED-Bench row") as info:
        load_prompts(str(path), "coding")
    assert info.value.fix is not None and "turns" in info.value.fix


    # what the row has and what a SPEED-Bench row needs, not a pydantic summary line
    path.write_text('{"category": "coding", "messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(DatasetError) as info:
        load_prompts(str(path), "coding")
    assert info.value.message == (
        f"{path}:1: not a SPEED-Bench row (turns: field required): it has fields `category`, `messages`; expected "
        "`category` (e.g. coding) and `turns` (a list of the user turns, at least one)")


HUB = "nvidia/SPEED-Bench qualitative/test"


def _page(rows: list[object], first: int) -> list[dict[str, object]]:
    """Rows as the datasets server's rows API carries them (`row_idx`, `row`)."""
    return [{"row_idx": first + i, "row": r, "truncated_cells": []} for i, r in enumerate(rows)]


def test_hub_rows_of_speed_benchs_shape_are_its_prompts() -> None:
    rows = hub_prompt_rows(_page([{"question_id": "q1", "category": "coding", "turns": ["sort it"], "extra": 1}], 0),
                           HUB)
    assert [(r.question_id, r.category, r.turns) for r in rows] == [("q1", "coding", ["sort it"])]


@pytest.mark.parametrize(("row", "problem", "has"), [
    ({"id": 7, "category": "coding", "messages": [{"role": "user", "content": "hi"}]}, "turns: field required",
     "fields `id`, `category`, `messages`"),
    ({"category": "coding", "turns": "write a sort"}, "turns: input should be a valid list",
     "fields `category`, `turns`"),
    ({"prompt": "write a sort"}, "category: field required; turns: field required", "fields `prompt`"),
])
def test_a_hub_row_of_another_shape_names_the_dataset_the_row_its_fields_and_the_expected_ones(
        row: object, problem: str, has: str) -> None:
    """A hub dataset whose rows lack `turns` (another schema, a renamed field) was a pydantic traceback."""
    good = {"category": "coding", "turns": ["ok"]}
    with pytest.raises(DatasetError) as info:
        hub_prompt_rows(_page([good, good, row], 200), HUB, offset=200)
    assert info.value.message == (f"{HUB} row 202: not a SPEED-Bench row ({problem}): it has {has}; expected "
                                  "`category` (e.g. coding) and `turns` (a list of the user turns, at least one)")
    assert info.value.fix is not None and "--prompts builtin" in info.value.fix and "--prompts FILE" in info.value.fix


def test_a_hub_row_that_is_not_an_object_is_named_so() -> None:
    with pytest.raises(DatasetError) as info:
        hub_prompt_rows(_page([["coding", "write a sort"]], 40), HUB, offset=40)
    assert info.value.message == (f"{HUB} row 40: not a SPEED-Bench row (a JSON list, not an object); expected an "
                                  "object with `category` (e.g. coding) and `turns` (a list of the user turns, at "
                                  "least one)")


def test_a_prompt_file_that_is_not_utf8_names_file_and_line(tmp_path: Path) -> None:
    """A Latin-1 row (or a binary file) given to --prompts was a UnicodeDecodeError traceback."""
    path = tmp_path / "rows.jsonl"
    good = json.dumps({"category": "coding", "turns": ["write a parser"]})
    path.write_bytes(f"{good}\n".encode() + '{"category": "coding", "turns": ["caf\u00e9"]}\n'.encode("latin-1"))
    with pytest.raises(DatasetError, match=r"rows.jsonl:2: prompt file is not UTF-8 text") as exc:
        load_prompts(str(path))
    assert exc.value.fix and "UTF-8" in exc.value.fix

def test_the_builtin_set_is_coding_prompts_that_say_they_are_not_speed_bench() -> None:
    prompts = load_prompts(BUILTIN, "coding")
    assert len(prompts.prompts) == 24 and len({p.question_id for p in prompts.prompts}) == 24
    assert all(p.turns[0].strip() and p.source == "llmsweep" for p in prompts.prompts)
    assert "not SPEED-Bench" in prompts.describe(24)


def test_the_hub_rows_are_read_page_by_page_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """The datasets-server rows API, served over loopback in its JSON shape: every page is read, one category kept."""
    import urllib.parse
    from http.server import BaseHTTPRequestHandler

    from support.loopback import serving

    from llmsweep.alcollect import prompts as prompts_mod

    rows = [{"question_id": f"q{i}", "category": "coding" if i % 2 else "math", "turns": [f"task {i}"]}
            for i in range(250)]
    seen: list[dict[str, list[str]]] = []

    class Rows(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            seen.append(query)
            offset, length = int(query["offset"][0]), int(query["length"][0])
            body = json.dumps({"rows": [{"row_idx": offset + i, "row": r, "truncated_cells": []}
                                        for i, r in enumerate(rows[offset:offset + length])],
                               "num_rows_total": len(rows)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    with serving(Rows) as url:
        monkeypatch.setattr(prompts_mod, "ROWS_API", f"{url}/rows")
        got = load_prompts("hub", "coding")
    assert len(seen) == 3 and [q["offset"][0] for q in seen] == ["0", "100", "200"]
    assert seen[0]["dataset"] == ["nvidia/SPEED-Bench"] and seen[0]["config"] == ["qualitative"]
    assert [p.question_id for p in got.prompts] == [f"q{i}" for i in range(1, 250, 2)]
    assert got.origin == "nvidia/SPEED-Bench qualitative/test"


def test_an_unreachable_hub_says_how_to_go_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.alcollect import prompts as prompts_mod

    monkeypatch.setattr(prompts_mod, "ROWS_API", "http://127.0.0.1:9/rows")  # discard port: refused at once
    with pytest.raises(DatasetError, match="cannot read nvidia/SPEED-Bench") as info:
        load_prompts("hub", "coding")
    assert info.value.fix is not None and "--prompts builtin" in info.value.fix


SEPARATORS = "\u2028\u2029\u0085"
"""Characters `str.splitlines()` ends a line at that JSON allows raw inside a string (the control characters it also
splits at, \\x0b, \\x1c…, are not valid raw in JSON)."""


def test_a_row_holding_a_unicode_line_separator_reads_and_later_lines_keep_their_numbers(tmp_path: Path) -> None:
    """A prompt file is JSON lines, each line ended by "\\n": a row whose text holds U+2028 (pasted prose, a JS
    source) was split in two and refused as not JSON, at a line number the file does not have."""
    path = tmp_path / "speed.jsonl"
    rows = [{"question_id": "a", "category": "coding", "turns": [f"write a sort{c}in C"]} for c in SEPARATORS]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text + '{"category": "coding", "turns": []}\r\n', encoding="utf-8")  # line 4: no turn
    with pytest.raises(DatasetError, match=rf"{path.name}:4: not a SPEED-Bench row \(turns"):
        load_prompts(str(path), "coding")
    path.write_text(text.replace("\n", "\r\n"), encoding="utf-8")  # (Windows line ends read as well)
    prompts = load_prompts(str(path), "coding")
    assert [p.turns[0] for p in prompts.prompts] == [f"write a sort{c}in C" for c in SEPARATORS]

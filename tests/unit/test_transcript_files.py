"""Reading transcripts for `memlane enqueue`: formats, folders, and errors that name the
file, item or line at fault."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from memlane.cli.transcript_files import expand_paths, read_transcripts
from memlane.pipeline.errors import TranscriptError


def transcript(
    conversation_id: str = "c1", user_id: str = "u1", **extra: object
) -> dict[str, object]:
    return {
        "conversation_id": conversation_id,
        "user_id": user_id,
        "messages": [
            {"role": "user", "content": "I prefer TypeScript."},
            {"role": "assistant", "content": "Noted."},
        ],
        **extra,
    }


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_json_object_a_json_list_and_jsonl_are_all_read_in_order(tmp_path: Path) -> None:
    one = write(tmp_path / "one.json", json.dumps(transcript("a")))
    many = write(tmp_path / "many.json", json.dumps([transcript("b"), transcript("c")]))
    lines = write(
        tmp_path / "lines.jsonl", json.dumps(transcript("d")) + "\n\n" + json.dumps(transcript("e"))
    )

    found = read_transcripts([one, many, lines])

    assert [s.transcript.conversation_id for s in found] == ["a", "b", "c", "d", "e"]
    assert [s.source for s in found] == [
        one,
        f"{many}[0]",
        f"{many}[1]",
        f"{lines} line 1",
        f"{lines} line 3",  # the blank line 2 is skipped but still counted
    ]


def test_several_json_values_in_a_json_file_or_on_stdin_are_read_as_jsonl(tmp_path: Path) -> None:
    text = json.dumps(transcript("a")) + "\n" + json.dumps(transcript("b")) + "\n"
    from_file = read_transcripts([write(tmp_path / "t.json", text)])
    from_stdin = read_transcripts(["-"], stdin=io.StringIO(text))

    assert [s.transcript.conversation_id for s in from_file] == ["a", "b"]
    assert [s.source for s in from_stdin] == ["<stdin> line 1", "<stdin> line 2"]


def test_a_folder_means_its_json_and_jsonl_files_sorted(tmp_path: Path) -> None:
    write(tmp_path / "b.jsonl", json.dumps(transcript("b")))
    write(tmp_path / "a.json", json.dumps(transcript("a")))
    write(tmp_path / "notes.txt", "not a transcript")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "c.json", json.dumps(transcript("c")))

    assert expand_paths([str(tmp_path)]) == [str(tmp_path / "a.json"), str(tmp_path / "b.jsonl")]
    assert [s.transcript.conversation_id for s in read_transcripts([str(tmp_path)])] == ["a", "b"]


def test_final_marks_every_transcript_final(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", json.dumps([transcript("a"), transcript("b", final=False)]))

    assert [s.transcript.final for s in read_transcripts([path])] == [False, False]
    assert [s.transcript.final for s in read_transcripts([path], final=True)] == [True, True]


NO_USER = json.dumps({"conversation_id": "c1", "messages": [{"role": "user", "content": "hi"}]})
BAD_ROLE = json.dumps(
    [transcript("a"), transcript("b", messages=[{"role": "bot", "content": "x"}])]
)
BAD_LINE = json.dumps(transcript("a")) + "\n{not json}\n"


@pytest.mark.parametrize(
    ("name", "text", "where", "problem"),
    [
        ("broken.json", '{"conversation_id": "c1",\n "user_id": }', "broken.json",
         "invalid JSON at line 2 column 13"),
        ("missing.json", NO_USER, "missing.json", "invalid transcript: user_id: Field required"),
        ("role.json", BAD_ROLE, "role.json[1]",
         "invalid transcript: messages.0.role: Input should be"),
        ("bad.jsonl", BAD_LINE, "bad.jsonl line 2", "invalid JSON at column 2"),
        ("scalar.json", "42", "scalar.json", "expected a transcript object, got a number"),
        ("empty.json", "[]", "empty.json", "the list of transcripts is empty"),
        ("blank.json", " \n", "blank.json", "empty, no transcripts"),
    ],
)  # fmt: skip
def test_a_bad_input_is_named_with_its_problem(
    tmp_path: Path, name: str, text: str, where: str, problem: str
) -> None:
    good = write(tmp_path / "good.json", json.dumps(transcript("ok")))
    bad = write(tmp_path / name, text)

    with pytest.raises(TranscriptError) as raised:
        read_transcripts([good, bad])

    assert bad.endswith(name)
    assert str(raised.value).startswith(f"{tmp_path / where}: {problem}")
    assert "\n" not in str(raised.value)


def test_missing_paths_empty_folders_and_stdin_twice_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no such file or folder"):
        expand_paths([str(tmp_path / "nope.json")])
    with pytest.raises(TranscriptError, match=r"folder has no \.json or \.jsonl files"):
        expand_paths([str(tmp_path)])
    with pytest.raises(TranscriptError, match="more than once"):
        expand_paths(["-", "-"])
    with pytest.raises(TranscriptError, match="<stdin>: empty"):
        read_transcripts(["-"], stdin=io.StringIO("\n\n"))

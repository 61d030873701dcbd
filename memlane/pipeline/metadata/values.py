"""What metadata may hold, and how the metadata of two conversations merge.

Metadata is a JSON object of at most MAX_KEYS keys, at most MAX_BYTES serialised
(compact JSON, UTF-8). A key is 1..MAX_KEY_CHARS characters of letters, digits and
`_ . : -`, not starting with a punctuation mark, and not one of the filter language's
words (`and`, `or`, `not`): a filter names any key it may hold. A value is a scalar
(string, number, boolean) or a list of at most MAX_LIST scalars. Null is refused: a key
without a value is a key left out. Integers stay within ±2^53, where every store
compares them exactly.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

from memlane.pipeline.errors import InvalidInputError

Scalar = str | int | float | bool
Value = Scalar | list[Scalar]
Metadata = dict[str, Value]

MAX_BYTES = 8192
MAX_KEYS = 64
MAX_KEY_CHARS = 64
MAX_LIST = 64
MAX_INT = 2**53
RESERVED_KEYS = frozenset({"and", "or", "not"})
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")

Path = tuple[str | int, ...]


class MetadataError(InvalidInputError):
    """Metadata or a metadata filter memlane cannot use; `path` names the bad part (from
    the object's root) and the message says what to send instead. Nothing was written."""

    code = "invalid_metadata"

    def __init__(self, message: str, *, path: Path, root: str = "metadata") -> None:
        where = ".".join(str(part) for part in (root, *path))
        super().__init__(f"{where}: {message}")
        self.path = path
        self.reason = message


def is_scalar(value: object) -> bool:
    """A string, a boolean, or a finite number within ±MAX_INT."""
    if isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return -MAX_INT <= value <= MAX_INT
    return isinstance(value, float) and math.isfinite(value) and -MAX_INT <= value <= MAX_INT


def check_key(key: object, path: Path, *, root: str = "metadata") -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key) or len(key) > MAX_KEY_CHARS:
        raise MetadataError(
            f"a key is 1 to {MAX_KEY_CHARS} letters, digits or `_ . : -`, starting with a "
            "letter or digit",
            path=path,
            root=root,
        )
    if key in RESERVED_KEYS:
        raise MetadataError(
            f"`{key}` is a word of the filter language, not a key: name it otherwise",
            path=path,
            root=root,
        )
    return key


def _check_value(value: object, path: Path) -> Value:
    if is_scalar(value):
        return value  # type: ignore[return-value]  # is_scalar checked its type
    if isinstance(value, list):
        if len(value) > MAX_LIST:
            raise MetadataError(f"a list holds at most {MAX_LIST} values", path=path)
        for i, item in enumerate(value):
            if not is_scalar(item):
                raise MetadataError(_SCALAR_ONLY, path=(*path, i))
        return list(value)
    if value is None:
        raise MetadataError("null is not a value: leave the key out", path=path)
    raise MetadataError(_SCALAR_ONLY + ", or a list of them", path=path)


_SCALAR_ONLY = "a value is a string, a boolean or a finite number within ±2^53"


def check_metadata(raw: object) -> Metadata:
    """`raw` as metadata (module docstring), or a MetadataError naming the bad part."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise MetadataError("metadata is a JSON object of keys and values", path=())
    if len(raw) > MAX_KEYS:
        raise MetadataError(f"at most {MAX_KEYS} keys", path=())
    checked: Metadata = {}
    for key, value in raw.items():
        checked[check_key(key, (str(key),))] = _check_value(value, (key,))
    if serialised_size(checked) > MAX_BYTES:
        raise MetadataError(f"at most {MAX_BYTES} bytes as compact JSON", path=())
    return checked


def serialised_size(metadata: Mapping[str, Value]) -> int:
    return len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())


def same_value(a: Scalar, b: Scalar) -> bool:
    """JSON's equality: a boolean equals only a boolean, numbers by value (1 == 1.0),
    strings by their characters."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


def _order(value: Scalar) -> tuple[int, float, str]:
    """Booleans, then numbers, then strings, each by value: a merge's order."""
    if isinstance(value, bool):
        return (0, float(value), "")
    if isinstance(value, str):
        return (2, 0.0, value)
    return (1, float(value), "")


def values_of(value: Value) -> list[Scalar]:
    return list(value) if isinstance(value, list) else [value]


def merge_metadata(kept: Mapping[str, Value], confirming: Mapping[str, Value]) -> Metadata:
    """The metadata of a memory `kept` confirmed in a conversation of metadata
    `confirming`: every key of either; a key in both with different values holds the
    values of both, each once (`same_value`), booleans then numbers then strings, each
    by value — the same list whichever conversation came first. A merged list stops at
    MAX_LIST values (the first in that order), and a key whose merge would pass
    MAX_BYTES keeps what it held: a confirmation never makes metadata unusable."""
    merged: Metadata = dict(kept)
    for key in sorted(confirming):
        new = confirming[key]
        if key not in merged:
            candidate: Value = new
        else:
            old = merged[key]
            if _equal(old, new):
                continue
            union: list[Scalar] = []
            for value in sorted([*values_of(old), *values_of(new)], key=_order):
                if not any(same_value(value, seen) for seen in union):
                    union.append(value)
            candidate = union[:MAX_LIST] if len(union) > 1 else union[0]
        trial = {**merged, key: candidate}
        if len(trial) <= MAX_KEYS and serialised_size(trial) <= MAX_BYTES:
            merged = trial
    return merged


def _equal(a: Value, b: Value) -> bool:
    left, right = values_of(a), values_of(b)
    return (
        isinstance(a, list) == isinstance(b, list)
        and len(left) == len(right)
        and all(same_value(x, y) for x, y in zip(left, right, strict=True))
    )

"""The TypeScript client (clients/typescript) is generated from the OpenAPI document it
ships with, and its errors mirror the Python client's, code for code."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from memlane.client.errors import ERRORS
from memlane.pipeline.error_codes import API_ERRORS

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "typescript"
REGENERATE = "npm --prefix clients/typescript run generate"


def test_the_client_was_generated_from_the_current_openapi_document() -> None:
    document = (ROOT / "docs" / "openapi.json").read_bytes()
    stamp = re.search(
        r"^// openapi-sha256: ([0-9a-f]{64})$", (CLIENT / "src" / "schema.ts").read_text(), re.M
    )
    assert stamp, f"src/schema.ts has no openapi-sha256 line: run `{REGENERATE}`"
    assert stamp[1] == hashlib.sha256(document).hexdigest(), (
        f"docs/openapi.json changed since the TypeScript client was generated: run `{REGENERATE}`"
    )


def test_every_error_code_has_the_python_clients_error_class() -> None:
    source = (CLIENT / "src" / "errors.ts").read_text()
    table = re.search(r"export const ERRORS[^{]*\{(.*?)\n\};", source, re.S)
    assert table, "errors.ts has no ERRORS table"
    typescript = dict(re.findall(r"^\s+(\w+): (\w+),$", table[1], re.M))
    python = {wire.code: error.__name__ for wire, error in ERRORS.items()}
    assert typescript == python
    assert set(typescript) == {wire.code for wire in API_ERRORS}
    for name in set(python.values()):
        assert re.search(rf"^export class {name} extends ", source, re.M), name


def test_the_lock_file_is_committed_and_node_modules_is_not() -> None:
    package = json.loads((CLIENT / "package.json").read_text())
    lock = json.loads((CLIENT / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == package["dependencies"]
    assert "node_modules/" in (ROOT / ".gitignore").read_text().splitlines()
    assert package["scripts"]["test"].endswith("node --test dist/test/")

"""A JSON Schema checker for the keywords rlmem's schemas use (type, required, properties, items,
const, enum, minimum): Debian's python3 here has no jsonschema module, and PyPI is not used."""

from __future__ import annotations

import json
from pathlib import Path

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_KNOWN = {"$schema", "$id", "title", "description", "type", "required", "properties", "items", "const", "enum",
          "minimum"}


def errors(value, schema: dict, where: str = "$") -> list[str]:
    unknown = set(schema) - _KNOWN
    assert not unknown, f"schema_check does not implement {unknown} (at {where})"
    found = []
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[kind](value) for kind in kinds):
            return [f"{where}: {value!r} is not of type {kinds}"]
    if "const" in schema and value != schema["const"]:
        found.append(f"{where}: {value!r} != const {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        found.append(f"{where}: {value} < minimum {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{where}: required key {key!r} missing")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                found += errors(value[key], sub, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += errors(item, schema["items"], f"{where}[{index}]")
    return found


def steplog_schema() -> dict:
    path = Path(__file__).resolve().parents[2] / "docs" / "schema" / "steplog.schema.json"
    return json.loads(path.read_text(encoding="utf-8"))


def check_steplog(path) -> list[dict]:
    """Every line of a StepMonitor log, each checked against docs/schema/steplog.schema.json."""
    schema = steplog_schema()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        record = json.loads(line)
        problems = errors(record, schema)
        assert not problems, f"{path}:{number} breaks the steplog schema: {problems}"
        records.append(record)
    return records

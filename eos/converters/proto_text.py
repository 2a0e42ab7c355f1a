"""A ``FileDescriptorProto`` as ``.proto`` text (proto3): what the registry stores and
what ``protoc`` compiles. Covers what :mod:`.protobuf` builds: a package, imports,
messages with nested messages, scalar / message / repeated / ``optional`` / map fields."""

from __future__ import annotations

import re
from typing import Any

from google.protobuf import descriptor_pb2

FDP = descriptor_pb2.FieldDescriptorProto
_NAMES = {
    FDP.TYPE_DOUBLE: "double", FDP.TYPE_FLOAT: "float", FDP.TYPE_INT64: "int64",
    FDP.TYPE_UINT64: "uint64", FDP.TYPE_INT32: "int32", FDP.TYPE_FIXED64: "fixed64",
    FDP.TYPE_FIXED32: "fixed32", FDP.TYPE_BOOL: "bool", FDP.TYPE_STRING: "string",
    FDP.TYPE_BYTES: "bytes", FDP.TYPE_UINT32: "uint32", FDP.TYPE_SFIXED32: "sfixed32",
    FDP.TYPE_SFIXED64: "sfixed64", FDP.TYPE_SINT32: "sint32", FDP.TYPE_SINT64: "sint64",
}  # fmt: skip


def render(proto: Any) -> str:
    lines = [f'syntax = "{proto.syntax or "proto3"}";']
    if proto.package:
        lines.append(f"package {proto.package};")
    if proto.dependency:
        lines.append("")
        lines += [f'import "{name}";' for name in proto.dependency]
    for message in proto.message_type:
        lines.append("")
        lines += _message(message, "")
    return "\n".join(lines) + "\n"


def _type(field: Any) -> str:
    return _NAMES.get(field.type) or field.type_name


def _message(message: Any, indent: str) -> list[str]:
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    inner = indent + "  "
    for field in message.field:
        entry = entries.get(field.type_name) if field.label == FDP.LABEL_REPEATED else None
        if entry is not None:
            key, value = entry.field
            lines.append(f"{inner}map<{_type(key)}, {_type(value)}> {field.name} = {field.number};")
            continue
        label = "repeated " if field.label == FDP.LABEL_REPEATED else ""
        label = "optional " if field.proto3_optional else label
        lines.append(f"{inner}{label}{_type(field)} {field.name} = {field.number};")
    for nested in message.nested_type:
        if nested.name not in entries:
            lines += _message(nested, inner)
    lines.append(f"{indent}}}")
    return lines


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_FIELD = re.compile(
    r"^\s*(?:(optional|repeated|required)\s+)?(map\s*<[^>]*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)"
)


def top_messages(text: str) -> dict[str, tuple[int, dict[str, tuple[str, int]]]]:
    """The top-level messages of ``.proto`` text in order: name → (index, its own fields:
    name → (label and type, number)). Enough to see whether values of one schema can be
    written as another (the fields of nested messages are not read)."""
    found: dict[str, tuple[int, dict[str, tuple[str, int]]]] = {}
    depth, current = 0, None
    for raw in _COMMENTS.sub("", text).replace("{", "{\n").replace("}", "\n}\n").split("\n"):
        line = raw.strip()
        if line.endswith("{"):
            words = line[:-1].split()
            if depth == 0 and words[:1] == ["message"] and len(words) == 2:
                current = found.setdefault(words[1], (len(found), {}))[1]
            depth += 1
        elif line == "}":
            depth -= 1
            if depth == 0:
                current = None
        elif depth == 1 and current is not None:
            for statement in line.split(";"):
                match = _FIELD.match(statement)
                if match and match[2] not in ("option", "reserved", "oneof"):
                    label, kind = match[1] or "", re.sub(r"\s+", "", match[2]).lstrip(".")
                    current[match[3]] = (f"{label} {kind}".strip(), int(match[4]))
    return found

"""How Connect's types map to Protobuf's, as Confluent's ``ProtobufConverter`` maps them:
what the converter's row path (:mod:`.protobuf`) and its column path
(:mod:`.protobuf_arrow`) share."""

from __future__ import annotations

from eos.api.schema import SchemaType

try:
    from google.protobuf import descriptor_pb2
except ImportError as exc:  # pragma: no cover - the error names the extra
    raise ImportError("the Protobuf converter needs protobuf: pip install 'eos[formats]'") from exc

FDP = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    SchemaType.INT8: FDP.TYPE_INT32, SchemaType.INT16: FDP.TYPE_INT32,
    SchemaType.INT32: FDP.TYPE_INT32, SchemaType.INT64: FDP.TYPE_INT64,
    SchemaType.FLOAT32: FDP.TYPE_FLOAT, SchemaType.FLOAT64: FDP.TYPE_DOUBLE,
    SchemaType.BOOLEAN: FDP.TYPE_BOOL, SchemaType.STRING: FDP.TYPE_STRING,
    SchemaType.BYTES: FDP.TYPE_BYTES,
}  # fmt: skip
"""A Connect scalar type → the Protobuf field type that carries it."""
MAP_KEYS = (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64,
            SchemaType.BOOLEAN, SchemaType.STRING)  # fmt: skip
"""Key types a Protobuf ``map`` takes natively (others become a repeated entry message)."""

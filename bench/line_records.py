"""LineRecordSource: FileSource handing its lines over one ``SourceRecord`` per line, as a
connector written against the per-record API would (bench only, for bench/peers.py's
``eos-file-records-*`` rows: the typical connector path, a SourceRecord per row through
the JSON converter). The runtime folds the records of a poll into a typed block before
the transforms and the converters (eos/columns/folding.py), as it does for any
connector's records that share a topic and their schema objects.

Everything but the hand-over is FileSource's (its settings, scans, reads, offsets): each
line is a record whose value is the line (``STRING`` schema) and whose source offset is
``{"position": <byte just after the line>}``, with one partition dict per file read —
FileSource's shape before it handed its lines over in record blocks. The worker loads it
by class path, ``bench.line_records:LineRecordSource``, with the repository on its
``PYTHONPATH`` (``bench`` is a namespace package: no ``__init__.py``).
"""

from __future__ import annotations

from eos.api import RecordBlock, SourceRecord, SourceTask
from eos.api.schema import STRING_SCHEMA
from services.connectors.file import FileSource, FileSourceTask

CLASS_PATH = "bench.line_records:LineRecordSource"


class LineRecordTask(FileSourceTask):
    """FileSourceTask with a SourceRecord per line."""

    def _hand_over(
        self, path: str, texts: list[str], ends: list[int], topic: str
    ) -> list[SourceRecord | RecordBlock]:
        partition, record = {"file": path}, SourceRecord  # the records only read the dict
        return [
            record(partition, {"position": end}, topic, text, value_schema=STRING_SCHEMA)
            for text, end in zip(texts, ends, strict=True)
        ]


class LineRecordSource(FileSource):
    """FileSource whose tasks hand over a SourceRecord per line."""

    def task_class(self) -> type[SourceTask]:
        return LineRecordTask

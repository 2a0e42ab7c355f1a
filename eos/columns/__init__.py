"""Columns: records as typed blocks and blocks as records, one subsystem with one contract.

A :class:`~eos.api.RecordBlock` carries many records as columns — Python lists or
``pyarrow`` arrays (``encoded=False``, Connect values with one schema) or bytes
(``encoded=True``). What works on columns works on every row at once; what cannot —
a transform step that needs single rows, a converter that has no column encoder, a row
that fails — says so by raising :class:`NeedsRows` (or, for a converter, by answering
None), and the block becomes records that join the record pipeline where the block left
it. The task's record path applies that rule in one place
(``eos.runtime.task.record_path._Segment.as_records``).

This package owns what both paths share:

- :mod:`.folding`: runs of records folded into typed blocks, and back;
- :mod:`.decode`: encoded rows read back into Connect values, for a transform that reads
  them (each converter offers a ``reader`` or none);
- :mod:`.text_struct`: a struct column of plain text that stays Python (HoistField's);
- :mod:`.arrow_bytes`: binary arrays of per-row encodings built with numpy and Arrow, for
  the converters' column encoders (``eos/converters/*_arrow.py``: each converter offers one
  or none).

It imports nothing of eos but the connector API and the errors.
"""

from __future__ import annotations

from collections.abc import Sequence

Mask = Sequence[bool] | None
"""Which rows of a block a step applies to; None: every row."""


class NeedsRows(Exception):
    """These columns cannot express the result (a step's, an encoder's): the rows must go
    one by one. A signal inside the column path, never raised out of it."""

"""PostgresCdcSource: PostgreSQL change data capture into Kafka, exactly once, in
Debezium's record shape (see docs/cdc.md).

Modules: :mod:`.settings` (Debezium's setting names), :mod:`.catalog` (the server, the
user, the publication, the tables), :mod:`.column_types` (types as Debezium maps them),
:mod:`.envelope` (the record shape), :mod:`.pgoutput` (the replication messages),
:mod:`.replication` (the slot), :mod:`.snapshot` (chunked reads at an exported
snapshot), :mod:`.position` (the source offset and the snapshot/stream handover rule),
:mod:`.task` and :mod:`.connector`.

The package imports psycopg2 (the ``cdc`` extra) only where it connects, so the class
loads without it.
"""

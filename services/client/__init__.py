"""The ``eos connectors``, ``eos plugins``, ``eos offsets`` and ``eos info`` commands:
a client of Kafka Connect's REST API (docs/cli.md).

It speaks the Connect contract only (paths, verbs, bodies, status codes and the
``{"error_code": ..., "message": ...}`` error shape), so it works against a Java
Kafka Connect cluster as well as against eos; fields only eos sends (``cluster``
in ``GET /``, ``alias`` of a plugin) are shown when present and never needed.

- :mod:`services.client.http`: the REST calls (:class:`ConnectClient`) and the
  errors a user sees when one fails;
- :mod:`services.client.files`: connector and offsets files, with every problem;
- :mod:`services.client.render`: tables and other human output;
- :mod:`services.client.commands`: the sub-commands and their exit codes.
"""

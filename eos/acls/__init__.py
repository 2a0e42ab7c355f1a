"""Least-privilege ACLs of an eos cluster: defined once (:mod:`eos.acls.rules`), planned,
checked against and granted on a Kafka cluster (``eos acls``), and the explanation of an
authorization error in the terms of that table (:mod:`eos.acls.denied`)."""

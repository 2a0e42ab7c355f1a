"""What runs: the ``eos`` command line, the worker service, REST API, dev Kafka,
bundled connectors and the verifier."""

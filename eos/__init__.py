"""eos: exactly-once source connectors into Apache Kafka.

Connector authors import :mod:`eos.api`; the runtime lives in :mod:`eos.runtime`.
"""

__version__ = "0.1.0"

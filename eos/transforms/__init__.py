"""Kafka Connect's single message transforms and predicates, with Connect's class names
and settings (docs/transforms.md).

The task loop uses :class:`TransformChain` (``from_config(props)``, ``apply(record)``,
``apply_block(block)``); validation uses :mod:`eos.transforms.chain_validation`. The base
classes users subclass are :class:`eos.api.Transformation` and :class:`eos.api.Predicate`.
"""

from eos.transforms.chain import BlockDecoder as BlockDecoder
from eos.transforms.chain import TransformChain as TransformChain

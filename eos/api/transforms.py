"""Single message transforms and predicates: what a user subclasses to reshape records
on their way into Kafka (Kafka Connect's ``Transformation`` and ``Predicate``).

A connector's ``transforms=a,b`` names a chain; ``transforms.a.type`` names each step's
class (a bundled one by its Connect name, an ``eos.transforms`` entry point, or a class
path) and ``transforms.a.*`` its settings. ``predicates=p`` with ``predicates.p.type``
and ``predicates.p.*`` defines predicates; ``transforms.a.predicate=p`` applies step
``a`` only to records ``p`` matches (``transforms.a.negate=true``: only to those it does
not). A plugin registers its classes in its own ``pyproject.toml``::

    [project.entry-points."eos.transforms"]
    MyTransform = "my_package.transforms:MyTransform"

    [project.entry-points."eos.predicates"]
    MyPredicate = "my_package.predicates:MyPredicate"

Lifecycle of both: created without arguments (once per task), :meth:`configure` once
with the step's own settings (the prefix removed), then :meth:`Transformation.apply` /
:meth:`Predicate.test` for each record from one task (never concurrently), and
:meth:`close` when the task stops. Validation (``…/config/validate``, create, update)
also creates one and calls :meth:`configure` to find problems, then :meth:`close`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from eos.api.records import SourceRecord
from eos.config.definition import ConfigDef


class Transformation(ABC):
    """Turns one record into another, or drops it (:meth:`apply` returns None).

    Never change the record given: return a new one
    (``dataclasses.replace(record, topic=…)``) or the same one unchanged. Raise
    :class:`~eos.errors.ConfigError` from :meth:`configure` naming the bad setting
    (without the ``transforms.<alias>.`` prefix; the framework adds it), and
    :class:`~eos.errors.DataError` from :meth:`apply` for a record it cannot handle.
    """

    reads_values: ClassVar[bool] = True
    """Whether :meth:`apply` reads or changes record keys or values. Set it to False
    for a transform of topics, headers or timestamps only: it then also runs on the
    rows of record blocks whose keys and values are still encoded bytes."""

    def version(self) -> str:
        return "0.0.0"

    def config_def(self) -> ConfigDef:
        """The transform's own settings (listed and checked by ``…/config/validate``)."""
        return ConfigDef()

    def configure(self, settings: Mapping[str, str]) -> None:
        """Called once with the transform's settings, e.g. ``{"field": "id"}`` for
        ``transforms.a.field=id``; ``self.config_def().parse(settings)`` types them."""

    @abstractmethod
    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The transformed record, ``record`` itself if nothing changes, or None to
        drop it (its source offset is still committed)."""

    def close(self) -> None:
        """Release what :meth:`configure` acquired."""


class Predicate(ABC):
    """Decides whether a transform applies to a record (Kafka Connect's ``Predicate``)."""

    reads_values: ClassVar[bool] = True
    """Whether :meth:`test` reads record keys or values (see
    :attr:`Transformation.reads_values`)."""

    def version(self) -> str:
        return "0.0.0"

    def config_def(self) -> ConfigDef:
        """The predicate's own settings."""
        return ConfigDef()

    def configure(self, settings: Mapping[str, str]) -> None:
        """Called once with the predicate's settings (``predicates.<alias>.`` removed)."""

    @abstractmethod
    def test(self, record: SourceRecord) -> bool:
        """True when the record matches."""

    def close(self) -> None:
        """Release what :meth:`configure` acquired."""

"""A connector's ``transforms`` and ``predicates`` settings, read as Kafka Connect reads
them, and every problem in them, each a :class:`~eos.errors.ConfigError` naming the
full setting (``transforms.route.regex``).

For each alias in ``transforms``: ``transforms.<alias>.type`` (required) names the
class; ``transforms.<alias>.predicate`` and ``transforms.<alias>.negate`` are the
implicit settings every transform has; every other ``transforms.<alias>.*`` setting is
the transform's own, passed to its ``configure`` without the prefix. Likewise
``predicates.<alias>.type`` and ``predicates.<alias>.*`` for each alias in
``predicates``. The lists themselves (``transforms``, ``predicates``: unique aliases)
are framework settings of :data:`eos.config.connector.CONNECTOR_CONFIG`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from eos.api.transforms import Predicate, Transformation
from eos.config.definition import ConfigDef, ConfigKey, Importance, Type
from eos.errors import ConfigError, PluginError
from eos.transforms.loader import predicate_class, transform_class

TRANSFORMS: Final = "transforms"
PREDICATES: Final = "predicates"
PREDICATE: Final = "predicate"
NEGATE: Final = "negate"


@dataclass
class Step:
    """One configured step of a chain: a transform and, maybe, its predicate."""

    alias: str
    type_name: str
    transform: Transformation
    predicate: Predicate | None = None
    predicate_alias: str | None = None
    negate: bool = False


@dataclass
class Loaded:
    """What :func:`load` made of the settings: the steps it could configure, the
    predicates by alias, and every problem found."""

    steps: list[Step] = field(default_factory=list)
    predicates: dict[str, tuple[str, Predicate]] = field(default_factory=dict)
    problems: list[ConfigError] = field(default_factory=list)

    def close(self) -> None:
        for step in self.steps:
            step.transform.close()
        for _, predicate in self.predicates.values():
            predicate.close()


def aliases(props: Mapping[str, str], key: str) -> list[str]:
    """The aliases listed in ``transforms`` or ``predicates`` (comma-separated)."""
    raw = props.get(key)
    return [a.strip() for a in raw.split(",") if a.strip()] if raw else []


def own_settings(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The settings under ``prefix``, without it."""
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def load(props: Mapping[str, str]) -> Loaded:
    """Create and configure every listed predicate and transform; collect all problems."""
    loaded = Loaded()
    for alias in aliases(props, PREDICATES):
        prefix = f"{PREDICATES}.{alias}."
        settings = own_settings(props, prefix)
        name = settings.pop("type", None)
        made = _make(predicate_class, name, settings, prefix, "predicate", loaded.problems)
        if made is not None and name is not None:
            loaded.predicates[alias] = (name, made)
    for alias in aliases(props, TRANSFORMS):
        step = _step(props, alias, loaded)
        if step is not None:
            loaded.steps.append(step)
    return loaded


def _step(props: Mapping[str, str], alias: str, loaded: Loaded) -> Step | None:
    prefix = f"{TRANSFORMS}.{alias}."
    settings = own_settings(props, prefix)
    name = settings.pop("type", None)
    raw_predicate = settings.pop(PREDICATE, None)
    predicate_alias = raw_predicate.strip() if raw_predicate is not None else None
    raw_negate = settings.pop(NEGATE, None)
    problems = loaded.problems
    before = len(problems)
    negate = _negate(prefix, raw_negate, predicate_alias, problems)
    predicate = None
    if predicate_alias is not None:
        found = loaded.predicates.get(predicate_alias)
        if found is None and predicate_alias not in aliases(props, PREDICATES):
            listed = ", ".join(aliases(props, PREDICATES)) or "nothing"
            problems.append(
                ConfigError(
                    prefix + PREDICATE,
                    raw_predicate,
                    f"no predicate {predicate_alias!r} is defined: list it in "
                    f"'{PREDICATES}' (which lists {listed}) and set its {PREDICATES}."
                    f"{predicate_alias}.type",
                )
            )
        predicate = None if found is None else found[1]
    transform = _make(transform_class, name, settings, prefix, "transformation", problems)
    if transform is None or name is None or len(problems) > before:
        if transform is not None:
            transform.close()
        return None
    return Step(alias, name, transform, predicate, predicate_alias, negate)


def _negate(
    prefix: str, raw: str | None, predicate: str | None, problems: list[ConfigError]
) -> bool:
    if raw is None:
        return False
    try:
        negate: bool = ConfigKey(prefix + NEGATE, Type.BOOLEAN).parse(raw)
    except ConfigError as exc:
        problems.append(exc)
        return False
    if predicate is None:
        problems.append(
            ConfigError(
                prefix + NEGATE,
                raw,
                f"there is no '{prefix}{PREDICATE}' defining a predicate to be negated; set it "
                f"or remove '{prefix}{NEGATE}'",
            )
        )
    return negate


def _make(
    find: Callable[[str], type[Any]],
    name: str | None,
    settings: dict[str, str],
    prefix: str,
    what: str,
    problems: list[ConfigError],
) -> Any:
    """A configured instance of the class ``name`` names, or None (problems added)."""
    type_key = prefix + "type"
    if name is None or not name.strip():
        problems.append(
            ConfigError(
                type_key,
                name,
                f"required setting is missing: the {what}'s class, e.g. "
                + ("InsertField$Value" if what == "transformation" else "TopicNameMatches"),
            )
        )
        return None
    try:
        instance = find(name.strip())()
    except PluginError as exc:
        problems.append(ConfigError(type_key, name, str(exc)))
        return None
    except Exception as exc:
        problems.append(ConfigError(type_key, name, f"creating it failed: {exc!r}"))
        return None
    found = _setting_problems(instance.config_def(), settings, prefix)
    if not found:
        try:
            instance.configure(settings)
        except ConfigError as exc:
            if prefix + exc.key == type_key:  # about the step as a whole: its type as set
                exc = ConfigError(exc.key, name, exc.allowed)
            found.append(prefixed(exc, prefix))
        except Exception as exc:
            found.append(ConfigError(type_key, name, f"configuring it failed: {exc!r}"))
    if found:
        problems.extend(found)
        instance.close()
        return None
    return instance


def _setting_problems(
    definition: ConfigDef, settings: Mapping[str, str], prefix: str
) -> list[ConfigError]:
    found = []
    for key_name, key in definition.keys.items():
        try:
            key.parse(settings.get(key_name))
        except ConfigError as exc:
            found.append(prefixed(exc, prefix))
    return found


def prefixed(error: ConfigError, prefix: str) -> ConfigError:
    """``error`` about the transform's own setting, naming the full setting."""
    key = error.key if error.key.startswith(prefix) else prefix + error.key
    renamed = ConfigError(key, error.value, error.allowed)
    renamed.__cause__ = error.__cause__
    return renamed


def definitions(props: Mapping[str, str]) -> ConfigDef:
    """The settings each listed transform and predicate has, with their full names, in
    groups ``Transforms: <alias>`` / ``Predicates: <alias>`` (for ``…/config/validate``)."""
    keys: list[ConfigKey] = []
    for kind, find in ((TRANSFORMS, transform_class), (PREDICATES, predicate_class)):
        what = "transformation" if kind == TRANSFORMS else "predicate"
        for alias in aliases(props, kind):
            prefix, group = f"{kind}.{alias}.", f"{kind.capitalize()}: {alias}"
            keys.append(
                ConfigKey(
                    prefix + "type",
                    Type.CLASS,
                    doc=f"Class for the {alias!r} {what}.",
                    importance=Importance.HIGH,
                    group=group,
                )
            )
            if kind == TRANSFORMS:
                keys += _implicit(prefix, group)
            own = _definition_of(find, props.get(prefix + "type"))
            keys += [
                dataclasses.replace(k, name=prefix + k.name, group=group)
                for k in own.keys.values()
                if kind == PREDICATES or k.name not in (PREDICATE, NEGATE)
            ]
    unique: dict[str, ConfigKey] = {}
    for key in keys:
        unique.setdefault(key.name, key)
    return ConfigDef(unique.values())


def _implicit(prefix: str, group: str) -> list[ConfigKey]:
    return [
        ConfigKey(
            prefix + PREDICATE,
            Type.STRING,
            None,
            "The alias of a predicate used to determine whether to apply this transformation.",
            group=group,
        ),
        ConfigKey(
            prefix + NEGATE,
            Type.BOOLEAN,
            False,
            "Whether the configured predicate should be negated.",
            group=group,
        ),
    ]


def _definition_of(find: Callable[[str], type[Any]], name: str | None) -> ConfigDef:
    if not name:
        return ConfigDef()
    try:
        definition: ConfigDef = find(name.strip())().config_def()
    except Exception:
        return ConfigDef()  # the type's own problem is reported on its type setting
    return definition

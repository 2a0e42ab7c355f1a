"""Definitions and validation of worker and connector settings, and settings files."""

from eos.config.connector import CONNECTOR_CONFIG as CONNECTOR_CONFIG
from eos.config.connector import CONNECTOR_PREFIXES as CONNECTOR_PREFIXES
from eos.config.connector import IGNORED_OVERRIDES as IGNORED_OVERRIDES
from eos.config.connector import ConnectorConfig as ConnectorConfig
from eos.config.definition import NO_DEFAULT as NO_DEFAULT
from eos.config.definition import ConfigDef as ConfigDef
from eos.config.definition import ConfigKey as ConfigKey
from eos.config.definition import Importance as Importance
from eos.config.definition import NonEmpty as NonEmpty
from eos.config.definition import OneOf as OneOf
from eos.config.definition import Range as Range
from eos.config.definition import TopicName as TopicName
from eos.config.definition import Type as Type
from eos.config.files import load_config_file as load_config_file
from eos.config.files import load_json as load_json
from eos.config.files import load_properties as load_properties
from eos.config.files import load_yaml as load_yaml
from eos.config.worker import IGNORED_WORKER_SETTINGS as IGNORED_WORKER_SETTINGS
from eos.config.worker import WORKER_CONFIG as WORKER_CONFIG
from eos.config.worker import WORKER_PREFIXES as WORKER_PREFIXES
from eos.config.worker import WorkerConfig as WorkerConfig
from eos.config.worker import docs_table as docs_table

"""What connector authors import. Nothing here depends on the runtime."""

from eos.api.connector import ConnectorContext as ConnectorContext
from eos.api.connector import ConnectorTransactionBoundaries as ConnectorTransactionBoundaries
from eos.api.connector import ExactlyOnceSupport as ExactlyOnceSupport
from eos.api.connector import SourceConnector as SourceConnector
from eos.api.records import RecordBlock as RecordBlock
from eos.api.records import RecordMetadata as RecordMetadata
from eos.api.records import SourceOffset as SourceOffset
from eos.api.records import SourcePartition as SourcePartition
from eos.api.records import SourceRecord as SourceRecord
from eos.api.task import BackgroundTasks as BackgroundTasks
from eos.api.task import OffsetStorageReader as OffsetStorageReader
from eos.api.task import SourceTask as SourceTask
from eos.api.task import SourceTaskContext as SourceTaskContext
from eos.api.task import TransactionContext as TransactionContext
from eos.api.task import WorkerResources as WorkerResources
from eos.config.definition import NO_DEFAULT as NO_DEFAULT
from eos.config.definition import ConfigDef as ConfigDef
from eos.config.definition import ConfigKey as ConfigKey
from eos.config.definition import Importance as Importance
from eos.config.definition import NonEmpty as NonEmpty
from eos.config.definition import OneOf as OneOf
from eos.config.definition import Range as Range
from eos.config.definition import Type as Type
from eos.errors import ConfigError as ConfigError

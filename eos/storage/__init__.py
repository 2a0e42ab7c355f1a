"""The internal topics: config log, offset logs, status log (formats in each module's docstring)."""

from eos.storage.config_log import ConfigLog as ConfigLog
from eos.storage.config_log import ConfigRecord as ConfigRecord
from eos.storage.config_log import ConfigSnapshot as ConfigSnapshot
from eos.storage.config_log import ConfigState as ConfigState
from eos.storage.config_log import SessionKey as SessionKey
from eos.storage.config_log import TargetState as TargetState
from eos.storage.offset_log import CombinedOffsetReader as CombinedOffsetReader
from eos.storage.offset_log import OffsetBatch as OffsetBatch
from eos.storage.offset_log import OffsetLog as OffsetLog
from eos.storage.offset_log import canonical_partition as canonical_partition
from eos.storage.offset_log import decode_offset_record as decode_offset_record
from eos.storage.offset_log import encode_offset_key as encode_offset_key
from eos.storage.offset_log import encode_offset_value as encode_offset_value
from eos.storage.status_log import Status as Status
from eos.storage.status_log import StatusLog as StatusLog

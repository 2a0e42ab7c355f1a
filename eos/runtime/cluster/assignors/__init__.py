"""Assignors: who runs which connector and task (docs/cluster.md).

The bundled ones are ``round-robin``, ``sticky`` (the default), ``cooperative``,
``failover`` and ``zone``; :func:`make_assignor` finds them, and any a plugin installs,
by name.
"""

from eos.runtime.cluster.assignors.base import Assignment as Assignment
from eos.runtime.cluster.assignors.base import AssignmentRequest as AssignmentRequest
from eos.runtime.cluster.assignors.base import AssignmentResult as AssignmentResult
from eos.runtime.cluster.assignors.base import Assignor as Assignor
from eos.runtime.cluster.assignors.base import AssignorSettings as AssignorSettings
from eos.runtime.cluster.assignors.base import Member as Member
from eos.runtime.cluster.assignors.base import TaskId as TaskId
from eos.runtime.cluster.assignors.cooperative import CooperativeAssignor as CooperativeAssignor
from eos.runtime.cluster.assignors.failover import FailoverAssignor as FailoverAssignor
from eos.runtime.cluster.assignors.loader import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from eos.runtime.cluster.assignors.loader import available_assignors as available_assignors
from eos.runtime.cluster.assignors.loader import make_assignor as make_assignor
from eos.runtime.cluster.assignors.round_robin import RoundRobinAssignor as RoundRobinAssignor
from eos.runtime.cluster.assignors.sticky import StickyAssignor as StickyAssignor
from eos.runtime.cluster.assignors.zone import ZoneAssignor as ZoneAssignor

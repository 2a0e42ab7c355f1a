"""``sticky``: balanced, moving as little as possible (the default).

Connectors are balanced among the members to within one, and so are tasks
(counted over all connectors, separately from connectors). A connector or task
stays on the member that runs it unless that member holds more than its share
(if two members claim one, the first by member id keeps it). Work that is new,
whose member left, or that an overloaded member gives up goes to the
least-loaded members (ties by member id). So adding a member moves about 1/n
of the work to it, and removing one moves only the work it ran. Work of a
member that left moves at once: choose ``cooperative`` to hold it back for a
while in case the member returns.
"""

from __future__ import annotations

from eos.runtime.cluster.assignors._balance import sticky_assignments
from eos.runtime.cluster.assignors.base import AssignmentRequest, AssignmentResult, Assignor


class StickyAssignor(Assignor):
    name = "sticky"

    def assign(self, request: AssignmentRequest) -> AssignmentResult:
        return AssignmentResult(sticky_assignments(request, request.connectors, request.tasks))

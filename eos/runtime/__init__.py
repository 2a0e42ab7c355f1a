"""The actors that run connectors. The worker and its supervisor stand at the root with the
actors every worker has (connector actors, offset mirror, health); a source task and its
record path live in :mod:`eos.runtime.task`, the group, the leader and the coordinator in
:mod:`eos.runtime.cluster`."""

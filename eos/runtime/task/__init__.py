"""The task's room: one source task and everything on its way from poll to commit — the
task template and its two variants, the record path, tolerance and dead letters, the
start-up gate, what the worker hands a task, and the task producers (docs/architecture.md)."""

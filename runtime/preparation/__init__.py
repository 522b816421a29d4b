"""The pieces of preparation, kept small; ``runtime.prepare`` drives them and is the public API.

* ``errors`` -- what preparation raises, and why each is a distinct class.
* ``identifiers`` -- run ids and the tool version recorded in ``RunCreated``.
* ``input_checks`` -- task, providers and output folder, checked before the first event.
* ``ledger`` -- appends this session's events (optimistic concurrency) and keeps the lease.
* ``logged_progress`` -- what the run's log already holds, so resume redoes only the rest.
* ``candidates`` -- listing and materializing through a provider, contract enforced.
* ``role_preparer`` -- one role's pool of prepared assets, logging only new facts.
* ``batch_job`` -- every role's pool, then one resolved asset set and deployment per batch.
* ``session_outcome`` -- run a job to its end: report on success, ``RunFailed`` on failure.
"""

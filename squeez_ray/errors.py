"""The one error type of the jobs (ground floor, so any library module may raise it).

A ``JobError`` is input, paths or settings a person must fix. The job runner
(``squeez_ray.runner``) reports it as one line ``JOB: message`` on stderr and exits 2, never with
a traceback. Each workflow's own error (``CollectError``, ``TrainJobError``, ...) subclasses it.
"""


class JobError(Exception):
    """Input, paths or settings a person must fix: reported as one line, exit 2."""

# Raises the harness's own "the task's fault" exception from its import, hoping to be stored as
# the task's failure (no verdict) instead of its own load_error.
from kbpworker.errors import TaskError

raise TaskError("the task file does not parse (not really)")

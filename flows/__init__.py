"""Prefect flows: they only compose tasks; `nightly` runs the stages in order."""

from flows.logs import configure_logs
from flows.redacted import redact_run_logs

# a worker imports the flows in each flow run's process: the log format (and the redaction
# of what the run loggers send to the Prefect API) applies there
configure_logs()
redact_run_logs()

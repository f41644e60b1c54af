"""Prefect flows: they only compose tasks; `nightly` runs the stages in order."""

from flows.logs import configure_logs

# a worker imports the flows in each flow run's process: the log format applies there
configure_logs()

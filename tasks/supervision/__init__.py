"""The supervision room: keeping the Prefect side alive and honest, apart from the flows
that use it — the environment set before Prefect is imported (`runtime.configure_prefect`),
the dead-API watchdog (`runtime.ApiWatch`), the one reach into Prefect's private API
(`runtime.discard_prefect_queues`), and the supervisor of the local Prefect server the
command line starts on first use and reuses (`local_server`)."""

"""The one place ragspan reaches into Prefect's private API (tasks/supervision/runtime.py,
`discard_prefect_queues`: the events worker's queue, dropped when the API is dead). A
Prefect upgrade that renames or reshapes any of it must fail here, by name, not leave a
dead-API run hanging at exit."""

from __future__ import annotations

import subprocess
import sys

from tests.servers import free_port

# With PREFECT_API_URL on a port nothing listens on, emitted events pile up in the events
# worker's queue; the function must find that worker, empty it and stop it.
_PILE_UP_AND_DISCARD = """
import time
from prefect.events import emit_event
from ragspan.tasks.supervision.runtime import discard_prefect_queues

for i in range(50):
    emit_event(event="ragspan.test.private", resource={"prefect.resource.id": f"ragspan.test.{i}"})
time.sleep(0.5)
t0 = time.monotonic()
discarded, pending = discard_prefect_queues(timeout=20)
print(discarded, pending, round(time.monotonic() - t0, 1))
"""


def test_prefect_still_has_the_private_queue_service_api_ragspan_uses():
    from prefect._internal.concurrency.services import _QueueServiceBase

    assert isinstance(_QueueServiceBase._instances, dict), "_QueueServiceBase._instances is gone or not a dict"
    assert hasattr(_QueueServiceBase._instance_cache_lock, "__enter__"), "_instance_cache_lock is gone"
    assert callable(_QueueServiceBase.drain_all), "_QueueServiceBase.drain_all is gone"


def test_discarding_prefect_queues_empties_a_real_events_worker_and_stops_it(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PREFECT_HOME": str(tmp_path / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api", "PREFECT_LOGGING_LEVEL": "CRITICAL",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "RAGSPAN_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", _PILE_UP_AND_DISCARD], capture_output=True, text=True,
                          timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    discarded, pending, seconds = done.stdout.split()
    assert int(discarded) > 0, done.stdout  # the worker and its queue were found
    assert int(pending) == 0 and float(seconds) < 20, done.stdout  # and it stopped

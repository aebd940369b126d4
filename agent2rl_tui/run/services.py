"""The run's long-running processes as one kind: started, watched, restarted, stopped.

A run has up to three processes beside its agent that must live as long as the agent does:
the grader (always), the meter (an agent CLI with a driver API) and the train-environment
service (an interactive task). Each is a ``Service``: it starts and gives its URL, says when it
died by itself, starts a successor on the same URL (so the agent's ``$GRADING_SERVER_URL``,
driver URL or ``$TRAIN_ENV_URL`` keeps working), and stops. The supervisor keeps them in one
table and checks them in one loop (`check`): a service that died is started again up to its
``max_restarts``, and every death and restart is an event in the record under the service's
own event kinds (``grader_restarted``, ``meter_died``, ...: the kinds runs have always had).
"""

from __future__ import annotations

import logging
from typing import Protocol

from agent2rl_tui.record.store import RunStore

log = logging.getLogger("agent2rl.supervisor")


class ServiceError(RuntimeError):
    """A service did not start (its log says why)."""


class Service(Protocol):
    """A long-running process of the run (the grader, the meter, the train-environment service)."""

    name: str
    """In log lines and events: "grader", "meter", "train-environment service"."""
    died_event: str
    """The event kind of a death with no restart left (and, where ``restarted_event`` is the same, of every death)."""
    restarted_event: str
    """The event kind of a death followed by a restart."""
    max_restarts: int
    restarts: int

    @property
    def pid(self) -> int | None: ...

    def start(self) -> str:
        """Start it; its URL (raises ``ServiceError``)."""

    def died(self) -> int | None:
        """The exit code of a process that ended by itself, else None."""

    def restart(self) -> str:
        """A successor of a dead one on the same URL (raises ``ServiceError``)."""

    def stop(self) -> None:
        """End it (and what it started)."""


def check(service: Service, store: RunStore) -> bool:
    """Start again a service that died, and say so in the record; False when it is gone for good
    (no restart left, or its successor did not start)."""
    code = service.died()
    if code is None:
        return True
    if service.restarts >= service.max_restarts:
        log.error("the %s died (exit code %s) and has been restarted %d times; not again",
                  service.name, code, service.restarts)
        store.event("supervisor", service.died_event, f"the {service.name} exited with code {code}; no restart left",
                    {"exit_code": code, "restarts": service.restarts})
        service.stop()
        return False
    service.restarts += 1
    try:
        service.restart()
    except (ServiceError, OSError) as exc:
        message = f"the {service.name} exited with code {code} and did not start again: {exc}"
        log.error("%s", message)
        store.event("supervisor", service.died_event, message, {"exit_code": code, "restarts": service.restarts})
        service.stop()
        return False
    message = f"the {service.name} exited with code {code}; restarted on the same URL (pid {service.pid})"
    log.error("%s", message)
    store.event("supervisor", service.restarted_event, message, {"exit_code": code, "restarts": service.restarts})
    return True

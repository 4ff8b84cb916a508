"""The run-status rules the pages act on, taken from the server's status machine (``server.lifecycle.status``).

``base.html`` renders ``STATUS_RULES`` into every page as a JSON data block (``<script type="application/json"
id="status-rules">``); ``core.js`` reads it (``S.statusIs(rule, status)``), so the browser code holds no list of
statuses of its own. Each rule is a sorted list of statuses:

- ``statuses``: every status, in the machine's order.
- ``finished``: ended and not coming back on its own (``FINISHED``): no stop/continue advice, no ETA.
- ``stoppable``: a trainer in it is told to continue (``ACTIVE``), so it can be asked to stop.
- ``resumable`` / ``retryable``: what ``POST /runs/{id}/resume`` and ``/retry`` accept (``RESUMABLE``,
  ``RETRYABLE``).
- ``extendable``: the budget is offered for change in every status but ``stopping`` (the run is on its way out).
- ``heard_from``: the run page says when the trainer last reported: ``running``, and ``lost`` (went silent).

``tests/web/test_status_rules.py`` drives a run into every status and checks the service answers stop, resume and
retry as these rules say.
"""

from __future__ import annotations

from server.lifecycle.status import ACTIVE, FINISHED, RESUMABLE, RETRYABLE, STATUSES

__all__ = ["STATUS_RULES"]

STATUS_RULES: dict[str, list[str]] = {
    "statuses": list(STATUSES),
    "finished": sorted(FINISHED),
    "stoppable": sorted(ACTIVE),
    "resumable": sorted(RESUMABLE),
    "retryable": sorted(RETRYABLE),
    "extendable": [s for s in STATUSES if s != "stopping"],
    "heard_from": sorted({"running", "lost"}),
}

"""The questions a task puts to its client: an input request of the running code (``ask_input``)
is listed in the task's record, which is input_required until an answer comes; an answer given
here is handed to the run, one given on another server reaches it through the store; a
``tasks/result`` waiting on the task delivers each request to its asker once."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .records import INPUT_REQUIRED, WORKING
from .state import Deliver, Notify, Run, TaskState, notify_quietly

log = logging.getLogger(__name__)


class Questions(TaskState):
    """Asking, showing, answering and delivering a task's input requests."""

    async def _ask(self, run: Run, request: dict[str, Any], notify: Notify) -> dict[str, Any]:
        """Ask the task's client ``request`` (an elicitation/create): the task is input_required,
        the request listed under a key of its own, until an answer comes (``answer``). A request
        the work stops waiting for (its run interrupted, cancelled) is withdrawn."""
        run.asked += 1
        key = f"input-{run.asked}"
        answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        run.asks[key] = (request, answered)
        try:
            await self._show_requests(run, notify)
            return await answered
        finally:
            del run.asks[key]
            answered.cancel()  # a deliverer still waiting on its client stops (no-op once answered)
            await asyncio.shield(self._show_requests(run, notify))

    async def _show_requests(self, run: Run, notify: Notify) -> None:
        """The run's outstanding input requests, into its record (status input_required while any)."""
        requests = {key: request for key, (request, _) in run.asks.items()}
        changed, run.changed = run.changed, asyncio.Event()
        changed.set()
        try:
            record = await self.store.update(run.record.task_id, status=INPUT_REQUIRED if requests else WORKING,
                                             input_requests=requests or None)
        except Exception:  # this server's clients still see them (finished reads the run)
            log.warning("jupyter_mcp: task %s: its input requests could not be stored", run.record.task_id,
                        exc_info=True)
            return
        if record is not None:
            await notify_quietly(notify, record)

    async def answer(self, owner: str, task_id: Any, responses: dict[str, Any]) -> None:
        """Answers to a task's input requests, by key; a key that is not outstanding is ignored.
        A run on another server is handed them through the store (its supervisor reads them)."""
        record = await self.get(owner, task_id)
        run = self.runs.get(record.task_id)
        if run is not None:
            self._hand(run, responses)
            return
        outstanding = {k: v for k, v in responses.items() if k in (record.input_requests or {})}
        if outstanding and not record.terminal:
            await self.store.update(record.task_id, input_responses={**(record.input_responses or {}), **outstanding})

    @staticmethod
    def _hand(run: Run, responses: dict[str, Any]) -> None:
        for key, response in responses.items():
            pending = run.asks.get(key)
            if pending is not None and not pending[1].done():
                pending[1].set_result(response)

    async def _deliver(self, owner: str, task_id: str, run: Run | None, key: str, request: dict[str, Any],
                       deliver: Deliver) -> None:
        """Put one input request to the asker and hand its answer over; given up when the run
        withdraws the request first (interrupted, timed out, cancelled)."""
        asking = asyncio.ensure_future(deliver(request))
        pending = run.asks.get(key) if run is not None else None
        if pending is not None:
            await asyncio.wait([asking, pending[1]], return_when=asyncio.FIRST_COMPLETED)
            if not asking.done():
                asking.cancel()
                await asyncio.gather(asking, return_exceptions=True)
                return
        response = await asking
        await self.answer(owner, task_id, {key: response})

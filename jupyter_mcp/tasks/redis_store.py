"""A task store on Redis: tasks survive a server restart and are shared between servers.

    c.JupyterMCPApp.task_store_class = "jupyter_mcp.tasks.redis_store:RedisTaskStore"
    c.JupyterMCPApp.task_store_options = {"url": "redis://redis:6379/0"}

A record is one JSON value; a finished one is given the ttl as its Redis expiry, so
retention costs nothing. Every server holds a short lease while it runs; a task
still "working" whose server's lease is gone (the server died) answers failed,
"server stopped", instead of working forever: when it is read, and within a few
seconds anyway, as every live server's heartbeat ends the working tasks of the servers
whose lease is gone (each server keeps the set of its working tasks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any, cast

from .records import FAILED, TERMINAL, TaskRecord

log = logging.getLogger(__name__)

LEASE_SEC = 10
HEARTBEAT_SEC = 3
DEFAULT_URL = "redis://127.0.0.1:6379/0"
SOCKET_TIMEOUT_SEC = 10  # a Redis that stops answering (but keeps the connection) is an error, not a hang


RETRIES = 3  # of one command on a broken connection, reconnecting each time (about 0.4 s in all)


class RedisTaskStore:
    shared = True  # other servers read and cancel these records

    def __init__(self, url: str = DEFAULT_URL, prefix: str = "jupyter-mcp:") -> None:
        """``url``: the Redis server (connection options go in its query string, as redis-py
        reads them); ``prefix``: of every key this store writes."""
        try:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import ExponentialBackoff
            from redis.exceptions import ConnectionError, TimeoutError
        except ImportError as exc:  # a clear start-up failure, never a silent fallback
            raise ImportError("RedisTaskStore needs the redis package: pip install 'jupyter-mcp[redis]'") from exc
        self.url = url
        self.prefix = prefix
        # A client from a URL retries nothing: after a Redis restart the first command on
        # each pooled connection would fail on its dead socket. Reconnect and retry instead.
        # (Options in the URL's query string win over these.)
        # decode_responses: every reply is str. redis-py's types say ``bytes | str`` whatever
        # the client, so the methods below cast each reply they read to the str it is.
        self.redis = aioredis.from_url(self.url, decode_responses=True,
                                       socket_timeout=SOCKET_TIMEOUT_SEC, socket_connect_timeout=SOCKET_TIMEOUT_SEC,
                                       retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), RETRIES),
                                       retry_on_error=[ConnectionError, TimeoutError])
        self.server_id: str | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    # -- keys ----------------------------------------------------------------------

    def _task(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}key:{key}"

    def _owner(self, owner: str | None) -> str:
        return f"{self.prefix}owner:{owner}" if owner is not None else f"{self.prefix}all"

    def _lease(self, server_id: str) -> str:
        return f"{self.prefix}server:{server_id}"

    def _working(self, server_id: str) -> str:
        """The set of a server's working tasks."""
        return f"{self.prefix}server-tasks:{server_id}"

    @property
    def _servers(self) -> str:
        """The set of servers that may have working tasks."""
        return f"{self.prefix}servers"

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, server_id: str) -> None:
        """Hold this server's lease for as long as it runs."""
        self.server_id = server_id
        await self._renew()
        self._heartbeat = asyncio.create_task(self._beat(), name="jupyter-mcp-redis-lease")

    async def _renew(self) -> None:
        try:
            await self.redis.set(self._lease(self.server_id or ""), "1", ex=LEASE_SEC)
            await self.redis.sadd(self._servers, self.server_id or "")
        except Exception as exc:  # Redis down: task calls fail clearly until it is back
            log.warning("jupyter_mcp: cannot reach the Redis task store at %s: %s", self.url, exc)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SEC)
            await self._renew()
            try:
                await self._end_orphans()
            except Exception:  # Redis away: the next beat tries again
                log.debug("jupyter_mcp: ending the tasks of stopped servers failed", exc_info=True)

    async def _end_orphans(self) -> None:
        """Every working task of a server whose lease is gone answers failed, read or not
        (so it gets its expiry, and stops counting against its owner's tasks)."""
        for server_id in cast("set[str]", await self.redis.smembers(self._servers)):
            if server_id == self.server_id or await self.redis.exists(self._lease(server_id)):
                continue
            for task_id in cast("set[str]", await self.redis.smembers(self._working(server_id))):
                record = await self.get(task_id)  # answers failed now, which takes it out of the set
                if record is None or record.terminal:  # gone already, or ended some other way
                    await self.redis.srem(self._working(server_id), task_id)
            if not await self.redis.scard(self._working(server_id)):
                await self.redis.srem(self._servers, server_id)

    async def stop(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        with contextlib.suppress(Exception):
            if self.server_id:
                await self.redis.delete(self._lease(self.server_id))
                if not await self.redis.scard(self._working(self.server_id)):
                    await self.redis.srem(self._servers, self.server_id)
        await self.redis.aclose()

    # -- the store protocol --------------------------------------------------------------

    @staticmethod
    def _dump(record: TaskRecord) -> str:
        return json.dumps(record.to_dict(), separators=(",", ":"), default=str)

    async def create(self, record: TaskRecord) -> TaskRecord:
        """Store the record, or answer the live task its idempotency key already names.

        Servers race for a key: the key and its record are written in one transaction,
        which fails if the key changed since it was read (WATCH), so a reader never sees a
        key whose record is not there yet, and exactly one of two racing servers wins."""
        from redis.exceptions import WatchError

        key = self._key(record.idempotency_key) if record.idempotency_key else None
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    if key is not None:
                        await pipe.watch(key)
                        holder = cast("str | None", await pipe.get(key))
                        if holder is not None:
                            await pipe.watch(self._task(holder))  # it may expire meanwhile
                            raw = await pipe.get(self._task(holder))
                            if raw is not None and not TaskRecord.from_dict(json.loads(raw)).expired():
                                await pipe.reset()
                                found = await self.get(holder)  # settled: a dead server's task answers failed
                                if found is not None:
                                    return found
                                continue  # it expired just now: the key is free
                    pipe.multi()
                    if key is not None:
                        pipe.set(key, record.task_id)
                    pipe.set(self._task(record.task_id), self._dump(record))
                    pipe.zadd(self._owner(record.owner), {record.task_id: record.created_at})
                    pipe.zadd(self._owner(None), {record.task_id: record.created_at})
                    if record.server_id:
                        pipe.sadd(self._working(record.server_id), record.task_id)
                    await pipe.execute()
                    return record
                except WatchError:  # another server claimed the key (or its holder changed): read again
                    continue

    async def get(self, task_id: str) -> TaskRecord | None:
        raw = cast("str | None", await self.redis.get(self._task(task_id)))
        return await self._alive(raw)

    async def _alive(self, raw: str | None) -> TaskRecord | None:
        if raw is None:
            return None
        record = TaskRecord.from_dict(json.loads(raw))
        if record.expired():
            return None
        if not record.terminal and record.server_id and record.server_id != self.server_id:
            if not await self.redis.exists(self._lease(record.server_id)):
                failed = await self.update(record.task_id, status=FAILED, input_requests=None,
                                           status_message="server stopped",
                                           error={"message": "server stopped", "partial": record.partial})
                return failed or await self.get(record.task_id)
        return record

    async def list(self, *, limit: int = 50, owner: str | None = None,
                   before: tuple[float, str] | None = None) -> list[TaskRecord]:
        index = self._owner(owner)
        top = f"({before[0]!r}" if before else "+inf"
        found: list[TaskRecord] = []
        while len(found) < limit:
            ids = cast("list[tuple[str, float]]",
                       await self.redis.zrevrangebyscore(index, top, "-inf", start=0, num=limit * 2, withscores=True))
            if not ids:
                break
            raws = cast("list[str | None]", await self.redis.mget([self._task(i) for i, _ in ids]))
            stale = []
            for (task_id, _), raw in zip(ids, raws):
                record = await self._alive(raw)
                if record is None:
                    stale.append(task_id)
                elif len(found) < limit:
                    found.append(record)
            if stale:
                await self.redis.zrem(index, *stale)
            top = f"({ids[-1][1]!r}"
        return found

    async def update(self, task_id: str, *, expect_status: str | None = None, **changes: Any) -> TaskRecord | None:
        from redis.exceptions import WatchError

        key = self._task(task_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    raw = await pipe.get(key)
                    if raw is None:
                        return None
                    record = TaskRecord.from_dict(json.loads(raw))
                    if record.terminal or (expect_status is not None and record.status != expect_status):
                        return None
                    for name, value in changes.items():
                        setattr(record, name, value)
                    record.last_updated_at = time.time()
                    pipe.multi()
                    if record.status in TERMINAL:  # retention: Redis drops it when its ttl is over
                        pipe.set(key, self._dump(record), px=max(1, record.ttl_ms))
                        if record.idempotency_key:
                            pipe.pexpire(self._key(record.idempotency_key), max(1, record.ttl_ms))
                        if record.server_id:
                            pipe.srem(self._working(record.server_id), task_id)
                    else:
                        pipe.set(key, self._dump(record))
                    await pipe.execute()
                    return record
                except WatchError:
                    continue

    async def count(self, owner: str) -> int:
        index = self._owner(owner)
        ids = cast("list[str]", await self.redis.zrange(index, 0, -1))
        if not ids:
            return 0
        async with self.redis.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.exists(self._task(task_id))
            present = await pipe.execute()
        gone = [task_id for task_id, there in zip(ids, present) if not there]
        if gone:  # expired: Redis dropped the record, the index still names it
            await self.redis.zrem(index, *gone)
        return len(ids) - len(gone)

    async def find_by_key(self, idempotency_key: str) -> TaskRecord | None:
        # A key whose task is gone is left alone: it expires with its task, and create
        # takes it over atomically (deleting it here could delete a key just claimed anew).
        task_id = cast("str | None", await self.redis.get(self._key(idempotency_key)))
        return await self.get(task_id) if task_id is not None else None

"""aiokafka driver for the compatibility suite.

Ops and their JSON shapes are described in compat_common.py and
tests/compat/driver.rs.
"""

import asyncio

import aiokafka.errors as Errors
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata

from compat_common import Deadline, header_pairs, record, run_driver, seek_result, sort_records, unhex

ACKS = {"0": 0, "1": 1, "all": "all"}


async def create_topics(request):
    admin = AIOKafkaAdminClient(bootstrap_servers=request["bootstrap"])
    await admin.start()
    response = await admin.create_topics(
        [NewTopic(t["name"], t["partitions"], 1, topic_configs=t["configs"]) for t in request["topics"]]
    )
    await admin.close()
    errors = {}
    for topic, code, *_ in response.topic_errors:
        errors[topic] = None if code == 0 else Errors.for_code(code).message
    return {"errors": errors}


async def list_topics(request):
    admin = AIOKafkaAdminClient(bootstrap_servers=request["bootstrap"])
    await admin.start()
    topics = {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics()}
    await admin.close()
    return {"topics": topics}


async def producer(request):
    p = AIOKafkaProducer(
        bootstrap_servers=request["bootstrap"],
        acks=ACKS[request["acks"]],
        compression_type=None if request["compression"] == "none" else request["compression"],
        enable_idempotence=request["idempotence"],
        linger_ms=5,
    )
    await p.start()
    return p


async def produce(request):
    p = await producer(request)
    futures = [
        await p.send(
            request["topic"],
            value=unhex(spec["value"]),
            key=unhex(spec["key"]),
            headers=header_pairs(spec),
            partition=spec["partition"],
            timestamp_ms=spec["timestamp"],
        )
        for spec in request["records"]
    ]
    offsets = []
    for future in futures:
        metadata = await asyncio.wait_for(future, 60)
        # acks=0: no metadata at all.
        offsets.append(metadata.offset if metadata is not None and metadata.offset >= 0 else None)
    await p.stop()
    return {"offsets": offsets}


async def consumer(request, reset="earliest"):
    # No group_id: partitions are assigned by hand and nothing is committed.
    c = AIOKafkaConsumer(
        bootstrap_servers=request["bootstrap"],
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=reset,
    )
    await c.start()
    return c


def as_record(r):
    return record(r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)


async def take(c, count, what):
    out = []
    deadline = Deadline()
    while len(out) < count:
        deadline.check(f"{what}: {len(out)} of {count} records")
        for records in (await c.getmany(timeout_ms=200, max_records=count - len(out))).values():
            out.extend(as_record(r) for r in records)
    return out


async def consume(request):
    c = await consumer(request)
    tps = [TopicPartition(request["topic"], p) for p in request["partitions"]]
    c.assign(tps)
    for tp in tps:
        if request["offset"] == "beginning":
            await c.seek_to_beginning(tp)
        else:
            c.seek(tp, request["offset"])
    records = await take(c, request["count"], "consume")
    await c.stop()
    return {"records": sort_records(records)}


async def offsets_for_times(request):
    c = await consumer(request)
    tp = TopicPartition(request["topic"], request["partition"])
    offsets = []
    for ts in request["timestamps"]:
        found = (await c.offsets_for_times({tp: ts}))[tp]
        offsets.append(None if found is None else found.offset)
    await c.stop()
    return {"offsets": offsets}


async def seek(request):
    tp = TopicPartition(request["topic"], request["partition"])
    c = await consumer(request)
    c.assign([tp])
    low = (await c.beginning_offsets([tp]))[tp]
    high = (await c.end_offsets([tp]))[tp]
    c.seek(tp, high - 1)
    (last,) = await take(c, 1, "the last record")
    await c.seek_to_beginning(tp)
    (first,) = await take(c, 1, "the first record after seek to beginning")
    await c.seek_to_end(tp)
    end = await c.position(tp)
    if end != high:
        raise RuntimeError(f"position after seek to end is {end}, the end offset is {high}")
    p = await producer({"bootstrap": request["bootstrap"], "acks": "all", "compression": "none", "idempotence": False})
    spec = request["append"]
    await p.send_and_wait(tp.topic, value=unhex(spec["value"]), key=unhex(spec["key"]), partition=tp.partition)
    await p.stop()
    (appended,) = await take(c, 1, "the record appended after seek to end")
    await c.stop()
    return seek_result(low, high, last, first, appended)


async def out_of_range(request):
    """Reads an offset below the log start under one auto_offset_reset policy."""
    tp = TopicPartition(request["topic"], request["partition"])
    c = await consumer(request, reset=request["reset"])
    c.assign([tp])
    c.seek(tp, request["offset"])
    if request["reset"] == "none":
        deadline = Deadline()
        while True:
            deadline.check("the out-of-range error")
            try:
                polled = await c.getmany(timeout_ms=200)
            except Errors.OffsetOutOfRangeError as e:
                await c.stop()
                return {"error": f"{type(e).__name__}: {e}"}
            if polled:
                raise RuntimeError(f"got records instead of an error: {polled}")
    if request["reset"] == "earliest":
        records = await take(c, request["count"], "records after the reset")
        await c.stop()
        return {"records": records}
    deadline = Deadline()
    while await c.position(tp) == request["offset"]:
        deadline.check("the reset to the latest offset")
        if await c.getmany(timeout_ms=100):
            raise RuntimeError("a record arrived after a reset to the latest offset")
    position = await c.position(tp)
    await c.stop()
    return {"position": position}


async def group(request):
    """Two members of one group share the topic's partitions and read each
    of their partitions to its end offset (`ends`); then both commit and
    leave."""
    topic, ends = request["topic"], request["ends"]

    async def member():
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=request["bootstrap"],
            group_id=request["group"],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )
        await c.start()
        return c

    members = [await member(), await member()]
    consumed = [[], []]
    deadline = Deadline()

    async def positions(m):
        return {tp.partition: await m.position(tp) for tp in m.assignment()}

    async def caught_up():
        for m in members:
            at = await positions(m)
            if not at or any(at[p] != ends[p] for p in at):
                return False
        return True

    while not await caught_up():
        deadline.check("both members to read their partitions to the end")
        for index, m in enumerate(members):
            for records in (await m.getmany(timeout_ms=100)).values():
                consumed[index].extend(as_record(r) for r in records)
    result = []
    for index, m in enumerate(members):
        at = await positions(m)
        await m.commit({TopicPartition(topic, p): OffsetAndMetadata(at[p], "") for p in at})
        result.append({"assigned": sorted(at), "records": sort_records(consumed[index])})
    for m in members:
        await m.stop()
    return {"members": result}


async def committed(request):
    c = AIOKafkaConsumer(bootstrap_servers=request["bootstrap"], group_id=request["group"], enable_auto_commit=False)
    await c.start()
    offsets = {}
    for p in range(request["partitions"]):
        offset = await c.committed(TopicPartition(request["topic"], p))
        offsets[str(p)] = -1 if offset is None else offset
    await c.stop()
    return {"offsets": offsets}


run_driver(globals(), wrap=asyncio.run)

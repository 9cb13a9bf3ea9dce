"""kafka-python driver for the compatibility suite.

Ops and their JSON shapes are described in compat_common.py and
tests/compat/driver.rs.
"""

import threading
import time

import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from compat_common import Deadline, header_pairs, record, run_driver, seek_result, sort_records, unhex

ACKS = {"0": 0, "1": 1, "all": "all"}


def create_topics(request):
    admin = KafkaAdminClient(bootstrap_servers=request["bootstrap"])
    response = admin.create_topics(
        {t["name"]: {"num_partitions": t["partitions"], "replication_factor": 1, "configs": t["configs"]}
         for t in request["topics"]},
        raise_errors=False,
    )
    admin.close()
    errors = {}
    for topic in response["topics"]:
        code = topic["error_code"]
        errors[topic["name"]] = None if code == 0 else Errors.for_code(code).message
    return {"errors": errors}


def list_topics(request):
    admin = KafkaAdminClient(bootstrap_servers=request["bootstrap"])
    names = admin.list_topics()
    topics = {t["name"]: len(t["partitions"]) for t in admin.describe_topics(names)}
    admin.close()
    return {"topics": topics}


def producer(request):
    return KafkaProducer(
        bootstrap_servers=request["bootstrap"],
        acks=ACKS[request["acks"]],
        compression_type=None if request["compression"] == "none" else request["compression"],
        enable_idempotence=request["idempotence"],
        linger_ms=5,
    )


def produce(request):
    p = producer(request)
    futures = [
        p.send(
            request["topic"],
            value=unhex(spec["value"]),
            key=unhex(spec["key"]),
            headers=header_pairs(spec),
            partition=spec["partition"],
            timestamp_ms=spec["timestamp"],
        )
        for spec in request["records"]
    ]
    p.flush(timeout=60)
    offsets = []
    for future in futures:
        metadata = future.get(timeout=60)
        offsets.append(metadata.offset if metadata.offset >= 0 else None)
    p.close()
    return {"offsets": offsets}


def consumer(request, reset="earliest"):
    # No group_id: partitions are assigned by hand and nothing is committed.
    return KafkaConsumer(
        bootstrap_servers=request["bootstrap"],
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=reset,
    )


def as_record(r):
    return record(r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)


def take(c, count, what):
    out = []
    deadline = Deadline()
    while len(out) < count:
        deadline.check(f"{what}: {len(out)} of {count} records")
        for records in c.poll(timeout_ms=200, max_records=count - len(out)).values():
            out.extend(as_record(r) for r in records)
    return out


def consume(request):
    c = consumer(request)
    tps = [TopicPartition(request["topic"], p) for p in request["partitions"]]
    c.assign(tps)
    for tp in tps:
        if request["offset"] == "beginning":
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, request["offset"])
    records = take(c, request["count"], "consume")
    c.close()
    return {"records": sort_records(records)}


def offsets_for_times(request):
    c = consumer(request)
    tp = TopicPartition(request["topic"], request["partition"])
    offsets = []
    for ts in request["timestamps"]:
        found = c.offsets_for_times({tp: ts})[tp]
        offsets.append(None if found is None else found.offset)
    c.close()
    return {"offsets": offsets}


def seek(request):
    tp = TopicPartition(request["topic"], request["partition"])
    c = consumer(request)
    c.assign([tp])
    low = c.beginning_offsets([tp])[tp]
    high = c.end_offsets([tp])[tp]
    c.seek(tp, high - 1)
    (last,) = take(c, 1, "the last record")
    c.seek_to_beginning(tp)
    (first,) = take(c, 1, "the first record after seek to beginning")
    c.seek_to_end(tp)
    end = c.position(tp)
    if end != high:
        raise RuntimeError(f"position after seek to end is {end}, the end offset is {high}")
    p = producer({"bootstrap": request["bootstrap"], "acks": "all", "compression": "none", "idempotence": False})
    spec = request["append"]
    p.send(tp.topic, value=unhex(spec["value"]), key=unhex(spec["key"]), partition=tp.partition).get(timeout=60)
    p.close()
    (appended,) = take(c, 1, "the record appended after seek to end")
    c.close()
    return seek_result(low, high, last, first, appended)


def out_of_range(request):
    """Reads an offset below the log start under one auto_offset_reset policy."""
    tp = TopicPartition(request["topic"], request["partition"])
    c = consumer(request, reset=request["reset"])
    c.assign([tp])
    c.seek(tp, request["offset"])
    if request["reset"] == "none":
        deadline = Deadline()
        while True:
            deadline.check("the out-of-range error")
            try:
                polled = c.poll(timeout_ms=200)
            except Errors.OffsetOutOfRangeError as e:
                c.close()
                return {"error": f"{type(e).__name__}: {e}"}
            if polled:
                raise RuntimeError(f"got records instead of an error: {polled}")
    if request["reset"] == "earliest":
        records = take(c, request["count"], "records after the reset")
        c.close()
        return {"records": records}
    deadline = Deadline()
    while c.position(tp) == request["offset"]:
        deadline.check("the reset to the latest offset")
        if c.poll(timeout_ms=100):
            raise RuntimeError("a record arrived after a reset to the latest offset")
    position = c.position(tp)
    c.close()
    return {"position": position}


def group_consumer(request):
    """A member of `request["group"]` subscribed to `request["topic"]`,
    committing only when told."""
    c = KafkaConsumer(
        bootstrap_servers=request["bootstrap"],
        group_id=request["group"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
    )
    c.subscribe([request["topic"]])
    return c


def group(request):
    """Two members of one group share the topic's partitions and read each
    of their partitions to its end offset (`ends`); then both commit and
    leave.

    Each member polls from its own thread, as applications run them:
    kafka-python 3.0 drops a JoinGroup/SyncGroup round that completes while
    no poll() of that member is waiting, and rejoins. Two members polled in
    turn from one thread therefore keep triggering rebalances for each other
    (against any broker); a member that is always inside poll() does not.
    """
    topic, ends = request["topic"], request["ends"]
    deadline = Deadline()
    lock = threading.Lock()
    stop = threading.Event()
    # Per member: its latest {partition: position}, then its final result.
    positions = [{}, {}]
    results = [None, None]
    failures = []

    def member(index):
        try:
            c = group_consumer(request)
            consumed, at = [], {}
            while not stop.is_set():
                for records in c.poll(timeout_ms=200).values():
                    consumed.extend(as_record(r) for r in records)
                at = {tp.partition: c.position(tp) for tp in c.assignment()}
                with lock:
                    positions[index] = at
            c.commit({TopicPartition(topic, p): OffsetAndMetadata(at[p], "", -1) for p in at})
            results[index] = {"assigned": sorted(at), "records": sort_records(consumed)}
            c.close()
        except Exception as error:  # reported by the main thread
            failures.append(error)
            stop.set()

    def caught_up():
        with lock:
            everyone = [dict(at) for at in positions]
        covered = set()
        for at in everyone:
            if not at or any(at[p] != ends[p] for p in at):
                return False
            covered |= set(at)
        return covered == set(range(len(ends)))

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        while not stop.is_set() and not caught_up():
            deadline.check("both members to read their partitions to the end")
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    if failures:
        raise failures[0]
    return {"members": results}


def committed(request):
    c = KafkaConsumer(bootstrap_servers=request["bootstrap"], group_id=request["group"], enable_auto_commit=False)
    offsets = {}
    for p in range(request["partitions"]):
        offset = c.committed(TopicPartition(request["topic"], p))
        offsets[str(p)] = -1 if offset is None else offset
    c.close()
    return {"offsets": offsets}


def produce_keyed(request):
    """Keyed records with no partition named, placed by kafka-python's
    default partitioner (murmur2, as the Java client); returns the partition
    each landed on."""
    p = KafkaProducer(bootstrap_servers=request["bootstrap"], linger_ms=5)
    futures = [p.send(request["topic"], value=b"v", key=unhex(key)) for key in request["keys"]]
    p.flush(timeout=60)
    partitions = [future.get(timeout=60).partition for future in futures]
    p.close()
    return {"partitions": partitions}


def group_member(request):
    """One member of a group shared with other clients: subscribes, polls
    for `seconds`, then leaves. Returns each assignment it held, in order,
    and how many records it read."""
    c = group_consumer(request)
    assignments = []
    read = 0
    end = time.monotonic() + request["seconds"]
    while time.monotonic() < end:
        for records in c.poll(timeout_ms=200).values():
            read += len(records)
        held = sorted(tp.partition for tp in c.assignment())
        if not assignments or assignments[-1] != held:
            assignments.append(held)
    c.close()
    return {"assignments": assignments, "read": read}


run_driver(globals(), extra=("produce_keyed", "group_member"))

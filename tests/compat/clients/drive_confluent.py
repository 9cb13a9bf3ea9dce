"""confluent-kafka (librdkafka) driver for the compatibility suite.

Ops and their JSON shapes are described in compat_common.py and
tests/compat/driver.rs.
"""

import json

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from compat_common import Deadline, header_pairs, record, run_driver, seek_result, sort_records, unhex


def base(request, **extra):
    config = {"bootstrap.servers": request["bootstrap"]}
    config.update(extra)
    return config


def create_topics(request):
    admin = AdminClient(base(request))
    futures = admin.create_topics(
        [
            NewTopic(t["name"], num_partitions=t["partitions"], replication_factor=1, config=t["configs"])
            for t in request["topics"]
        ],
        request_timeout=30,
    )
    errors = {}
    for name, future in futures.items():
        try:
            future.result()
            errors[name] = None
        except KafkaException as e:
            errors[name] = e.args[0].name()
    return {"errors": errors}


def list_topics(request):
    metadata = AdminClient(base(request)).list_topics(timeout=30)
    return {"topics": {name: len(t.partitions) for name, t in metadata.topics.items()}}


def producer(request):
    return Producer(
        base(
            request,
            **{
                "acks": request["acks"],
                "compression.type": request["compression"],
                "enable.idempotence": request["idempotence"],
                "linger.ms": 5,
            },
        )
    )


def produce(request):
    p = producer(request)
    records = request["records"]
    offsets = [None] * len(records)
    failures = []

    def delivered(index):
        def report(err, msg):
            if err is not None:
                failures.append(f"record {index}: {err}")
            elif msg.offset() is not None and msg.offset() >= 0:
                offsets[index] = msg.offset()

        return report

    for index, spec in enumerate(records):
        p.produce(
            request["topic"],
            value=unhex(spec["value"]),
            key=unhex(spec["key"]),
            partition=spec["partition"],
            timestamp=spec["timestamp"] or 0,
            headers=header_pairs(spec),
            on_delivery=delivered(index),
        )
        p.poll(0)
    left = p.flush(60)
    if left or failures:
        raise RuntimeError(f"{left} records undelivered; failures: {failures}")
    return {"offsets": offsets}


def consumer(request, reset="earliest", extra=None):
    # Partitions are assigned by hand and nothing is committed, but
    # confluent-kafka refuses a consumer without a group.id.
    settings = {
        "group.id": "compat-unused",
        "enable.auto.commit": False,
        "auto.offset.reset": reset,
        "enable.partition.eof": False,
    }
    settings.update(extra or {})
    return Consumer(base(request, **settings))


class FetchPosition:
    """The offset librdkafka's fetcher reads next in each partition, from its
    statistics: the consumer API shows a position only once a record has
    been consumed, not where a seek or a reset to the end has moved it."""

    def __init__(self):
        self.next_offsets = {}

    def config(self):
        return {"statistics.interval.ms": 100, "stats_cb": self.update}

    def update(self, stats):
        for topic in json.loads(stats)["topics"].values():
            for partition, state in topic["partitions"].items():
                if int(partition) < 0:
                    continue
                if state["fetch_state"] == "active":
                    self.next_offsets[int(partition)] = state["next_offset"]
                else:
                    self.next_offsets.pop(int(partition), None)

    def wait(self, c, partition, not_at, what):
        """Polls `c` until its fetcher is active at an offset not in `not_at`
        and returns it; raises if a record arrives meanwhile."""
        deadline = Deadline()
        while self.next_offsets.get(partition) in not_at:
            deadline.check(what)
            msg = c.poll(0.1)
            if msg is not None:
                raise RuntimeError(f"a record arrived while waiting for {what}: {msg.error() or msg.offset()}")
        return self.next_offsets[partition]


def as_record(msg):
    _, timestamp = msg.timestamp()
    return record(msg.partition(), msg.offset(), timestamp, msg.key(), msg.value(), msg.headers())


def take(c, count, what):
    """The next `count` records `c` delivers; raises on a consumer error."""
    out = []
    deadline = Deadline()
    while len(out) < count:
        deadline.check(f"{what}: {len(out)} of {count} records")
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        out.append(as_record(msg))
    return out


def start_offset(spec):
    return OFFSET_BEGINNING if spec == "beginning" else spec


def consume(request):
    c = consumer(request)
    c.assign([TopicPartition(request["topic"], p, start_offset(request["offset"])) for p in request["partitions"]])
    records = take(c, request["count"], "consume")
    c.close()
    return {"records": sort_records(records)}


def offsets_for_times(request):
    c = consumer(request)
    tps = [TopicPartition(request["topic"], request["partition"], ts) for ts in request["timestamps"]]
    # One lookup per timestamp: a request names each partition once.
    offsets = []
    for tp in tps:
        (found,) = c.offsets_for_times([tp], timeout=30)
        if found.error:
            raise KafkaException(found.error)
        offsets.append(found.offset if found.offset >= 0 else None)
    c.close()
    return {"offsets": offsets}


def seek(request):
    topic, partition = request["topic"], request["partition"]
    fetcher = FetchPosition()
    c = consumer(request, extra=fetcher.config())
    low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
    c.assign([TopicPartition(topic, partition, high - 1)])
    (last,) = take(c, 1, "the last record")
    c.seek(TopicPartition(topic, partition, OFFSET_BEGINNING))
    (first,) = take(c, 1, "the first record after seek to beginning")
    c.seek(TopicPartition(topic, partition, OFFSET_END))
    # The seek is done once the fetcher has looked the end offset up.
    fetcher.next_offsets.clear()
    end = fetcher.wait(c, partition, (None, first["offset"] + 1), "the fetcher to move to the end")
    if end != high:
        raise RuntimeError(f"seek to end moved the fetcher to {end}, the end offset is {high}")
    p = producer({"bootstrap": request["bootstrap"], "acks": "all", "compression": "none", "idempotence": False})
    spec = request["append"]
    p.produce(topic, value=unhex(spec["value"]), key=unhex(spec["key"]), partition=partition)
    if p.flush(60):
        raise RuntimeError("the appended record was not delivered")
    (appended,) = take(c, 1, "the record appended after seek to end")
    c.close()
    return seek_result(low, high, last, first, appended)


def out_of_range(request):
    """Reads an offset below the log start under one auto.offset.reset policy."""
    topic, partition = request["topic"], request["partition"]
    reset = {"none": "error"}.get(request["reset"], request["reset"])
    fetcher = FetchPosition()
    c = consumer(request, reset=reset, extra=fetcher.config())
    c.assign([TopicPartition(topic, partition, request["offset"])])
    if request["reset"] == "none":
        deadline = Deadline()
        while True:
            deadline.check("the out-of-range error")
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() is None:
                raise RuntimeError(f"got the record at {msg.offset()} instead of an error")
            error = msg.error()
            c.close()
            return {"error": f"{error.name()}: {error.str()}"}
    if request["reset"] == "earliest":
        records = take(c, request["count"], "records after the reset")
        c.close()
        return {"records": records}
    # latest: the fetcher moves to the end once the reset is done.
    position = fetcher.wait(c, partition, (None, request["offset"]), "the reset to the latest offset")
    c.close()
    return {"position": position}


def group(request):
    """Two members of one group share the topic's partitions and read each
    of their partitions to its end offset (`ends`); then both commit and
    leave."""
    topic, ends = request["topic"], request["ends"]
    config = base(
        request,
        **{
            "group.id": request["group"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        },
    )
    members = [Consumer(config), Consumer(config)]
    for m in members:
        m.subscribe([topic])
    consumed = [[], []]
    deadline = Deadline()

    def positions(m):
        return {tp.partition: tp.offset for tp in m.position(m.assignment())}

    def caught_up():
        for m in members:
            at = positions(m)
            if not at or any(at[p] != ends[p] for p in at):
                return False
        return True

    while not caught_up():
        deadline.check("both members to read their partitions to the end")
        for index, m in enumerate(members):
            msg = m.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            consumed[index].append(as_record(msg))
    result = []
    for index, m in enumerate(members):
        at = positions(m)
        m.commit(offsets=[TopicPartition(topic, p, at[p]) for p in sorted(at)], asynchronous=False)
        result.append({"assigned": sorted(at), "records": sort_records(consumed[index])})
    for m in members:
        m.close()
    return {"members": result}


def committed(request):
    c = Consumer(base(request, **{"group.id": request["group"], "enable.auto.commit": False}))
    tps = [TopicPartition(request["topic"], p) for p in range(request["partitions"])]
    offsets = {str(tp.partition): tp.offset for tp in c.committed(tps, timeout=30)}
    c.close()
    return {"offsets": offsets}


def produce_keyed(request):
    """Keyed records with no partition named, placed by librdkafka's
    murmur2_random partitioner (the Java client's); returns the partition
    each landed on."""
    p = Producer(base(request, **{"partitioner": "murmur2_random", "linger.ms": 5}))
    partitions = [None] * len(request["keys"])
    failures = []

    def delivered(index):
        def report(err, msg):
            if err is not None:
                failures.append(f"record {index}: {err}")
            else:
                partitions[index] = msg.partition()

        return report

    for index, key in enumerate(request["keys"]):
        p.produce(request["topic"], value=b"v", key=unhex(key), on_delivery=delivered(index))
        p.poll(0)
    if p.flush(60) != 0 or failures:
        raise RuntimeError(f"undelivered: {failures}")
    return {"partitions": partitions}


def transactions(request):
    """Runs `transactions` in order with one transactional producer: each
    sends its values (to `partition`) and then commits or aborts. Returns
    the values a read_committed and a read_uncommitted consumer then read
    from the start, in offset order."""
    topic, partition = request["topic"], request["partition"]
    p = Producer(base(request, **{"transactional.id": request["transactional_id"], "linger.ms": 5}))
    p.init_transactions(30)
    for transaction in request["transactions"]:
        p.begin_transaction()
        for value in transaction["values"]:
            p.produce(topic, value=value.encode(), partition=partition)
        # Written before the transaction ends (an abort would otherwise
        # drop records still queued in the client).
        if p.flush(30):
            raise RuntimeError("records left undelivered")
        if transaction["commit"]:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    # A transaction left open: read_committed readers stop before it.
    if request.get("leave_open"):
        p.begin_transaction()
        for value in request["leave_open"]:
            p.produce(topic, value=value.encode(), partition=partition)
        p.flush(30)
    return {
        "read_committed": read_values(request, "read_committed"),
        "read_uncommitted": read_values(request, "read_uncommitted"),
        "watermarks": committed_watermarks(request),
    }


def produce_values(request):
    """Text records [partition, key, value], acks=all."""
    p = Producer(base(request, **{"acks": "all", "linger.ms": 5}))
    for partition, key, value in request["records"]:
        p.produce(request["topic"], key=key.encode(), value=value.encode(), partition=partition)
        p.poll(0)
    if p.flush(60):
        raise RuntimeError("records left undelivered")
    return {}


def read_partition(request):
    """The values of one partition as a consumer of `isolation` reads them."""
    return {"values": read_values(request, request["isolation"])}


def read_values(request, isolation):
    """Every value of the partition a consumer of `isolation` reads, up to
    what it can see: read_committed stops at the last stable offset."""
    topic, partition = request["topic"], request["partition"]
    c = consumer(request, extra={"isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    values = []
    deadline = Deadline()
    while True:
        deadline.check(f"{isolation} read to the end")
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                break
            raise KafkaException(msg.error())
        values.append(msg.value().decode())
    c.close()
    return values


def committed_watermarks(request):
    """(low, high) as a read_committed consumer is told them: high is the
    last stable offset."""
    c = consumer(request, extra={"isolation.level": "read_committed"})
    low, high = c.get_watermark_offsets(TopicPartition(request["topic"], request["partition"]), timeout=30)
    c.close()
    return [low, high]


def acl_binding(spec):
    """An AclBinding (or, with `filter`, an AclBindingFilter) from
    [resource type, name, pattern type, principal, host, operation,
    permission], Kafka's names; null name, principal or host match any."""
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    restype, name, pattern, principal, host, operation, permission = spec
    # confluent-kafka names the CLUSTER resource type BROKER.
    restype = {"CLUSTER": "BROKER"}.get(restype, restype)
    return (
        ResourceType[restype],
        name,
        ResourcePatternType[pattern],
        principal,
        host,
        AclOperation[operation],
        AclPermissionType[permission],
    )


def acl_spec(binding):
    restype = {"BROKER": "CLUSTER"}.get(binding.restype.name, binding.restype.name)
    return [
        restype,
        binding.name,
        binding.resource_pattern_type.name,
        binding.principal,
        binding.host,
        binding.operation.name,
        binding.permission_type.name,
    ]


def acls(request):
    """Creates `create`, then answers `describe` (one filter) and `delete`
    (filters) in that order, then describes everything again."""
    from confluent_kafka.admin import AclBinding, AclBindingFilter

    admin = AdminClient(base(request))
    bindings = [AclBinding(*acl_binding(spec)) for spec in request["create"]]
    created = []
    if bindings:
        futures = admin.create_acls(bindings, request_timeout=30)
        for binding in bindings:
            try:
                futures[binding].result()
                created.append(None)
            except KafkaException as e:
                created.append(e.args[0].name())
    everything = AclBindingFilter(*acl_binding(["ANY", None, "ANY", None, None, "ANY", "ANY"]))
    described = admin.describe_acls(AclBindingFilter(*acl_binding(request["describe"])), request_timeout=30).result()
    filters = [AclBindingFilter(*acl_binding(spec)) for spec in request["delete"]]
    deleted = []
    if filters:
        futures = admin.delete_acls(filters, request_timeout=30)
        deleted = [[acl_spec(b) for b in futures[f].result()] for f in filters]
    after = admin.describe_acls(everything, request_timeout=30).result()
    return {
        "created": created,
        "described": sorted(acl_spec(b) for b in described),
        "deleted": [sorted(d) for d in deleted],
        "after": sorted(acl_spec(b) for b in after),
    }


def refused(request):
    """A producer's delivery to `topic` and a consumer's subscription in
    `group`: the error names each ends with."""
    p = Producer(base(request, **{"acks": "all", "retries": 0, "message.timeout.ms": 30000}))
    outcome = {}

    def report(err, msg):
        outcome["produce"] = None if err is None else err.name()

    p.produce(request["topic"], value=b"refused", on_delivery=report)
    if p.flush(60):
        raise RuntimeError("the record was neither delivered nor refused")
    c = consumer(request, extra={"group.id": request["group"]})
    c.subscribe([request["consume_topic"]])
    deadline = Deadline()
    while "consume" not in outcome:
        deadline.check("the consumer's error")
        msg = c.poll(0.2)
        if msg is not None and msg.error():
            outcome["consume"] = msg.error().name()
        elif msg is not None:
            outcome["consume"] = None
    c.close()
    return outcome


run_driver(
    globals(),
    extra=("produce_keyed", "transactions", "produce_values", "read_partition", "acls", "refused"),
)

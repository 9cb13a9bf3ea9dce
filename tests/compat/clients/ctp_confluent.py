"""A consume-transform-produce loop with confluent-kafka transactions, for
the compatibility suite's exactly-once test: it reads `input` in group
`group` (read_committed), writes `<value>:out` under the same key to
`output` and commits the consumed offsets in the same transaction, until its
position reaches `ends` (the input's end offset per partition). The harness
kills it and the broker with SIGKILL at seeded moments and starts it again;
exactly once means the output holds every input once.

Configuration: one JSON object on stdin (bootstrap, input, output, group,
transactional_id, ends). Exits 0 when done; raises on a fatal error (the
harness starts it again, which fences the previous instance's producer).
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_common import Deadline

BATCH = 25


def main():
    config = json.load(sys.stdin)
    ends = {int(p): end for p, end in config["ends"].items()}
    consumer = Consumer(
        {
            "bootstrap.servers": config["bootstrap"],
            "group.id": config["group"],
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": config["bootstrap"],
            "transactional.id": config["transactional_id"],
            "transaction.timeout.ms": 10000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    consumer.subscribe([config["input"]])
    deadline = Deadline(240)
    while True:
        deadline.check("the loop to reach the end of the input")
        assignment = consumer.assignment()
        if assignment and done(consumer, assignment, ends):
            break
        messages = consumer.consume(num_messages=BATCH, timeout=0.5)
        messages = [m for m in messages if m.error() is None]
        if not messages:
            continue
        try:
            producer.begin_transaction()
            for m in messages:
                producer.produce(config["output"], key=m.key(), value=m.value() + b":out", partition=m.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
        except KafkaException as e:
            error = e.args[0]
            if error.txn_requires_abort():
                print(f"aborting: {error}", file=sys.stderr)
                producer.abort_transaction(60)
                rewind(consumer)
            elif error.retriable():
                print(f"retriable, rewinding: {error}", file=sys.stderr)
                rewind_after_abort(producer, consumer)
            else:
                raise
    consumer.close()


def done(consumer, assignment, ends):
    """Whether the committed offsets of the whole input reach its end: the
    loop holds every partition (one instance runs), and every one is
    committed to its end."""
    if len(assignment) != len(ends):
        return False
    committed = consumer.committed(assignment, timeout=30)
    return all(tp.offset == ends[tp.partition] for tp in committed)


def rewind(consumer):
    """Back to the committed offsets: the aborted batch is read again."""
    committed = consumer.committed(consumer.assignment(), timeout=60)
    for tp in committed:
        offset = tp.offset if tp.offset >= 0 else 0
        consumer.seek(TopicPartition(tp.topic, tp.partition, offset))


def rewind_after_abort(producer, consumer):
    try:
        producer.abort_transaction(60)
    except KafkaException as e:
        print(f"abort after a retriable error: {e}", file=sys.stderr)
        time.sleep(0.5)
    rewind(consumer)


if __name__ == "__main__":
    main()

"""Produce `count` records to `topic` with confluent-kafka under the given
client settings, then read them back in a group; prints one JSON line:
{"produced": n, "consumed": n} or {"error": "<what the client said>"}.

Reads {"bootstrap", "config", "topic", "count"} as JSON on stdin.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer

WAIT_S = 30.0


def refused(errors):
    return any(
        "Authentication" in error or "SSL handshake failed" in error or "certificate verify" in error
        for error in errors
    )


def main():
    request = json.load(sys.stdin)
    config = {"bootstrap.servers": request["bootstrap"], **request["config"]}
    errors = []
    config["error_cb"] = lambda err: errors.append(str(err))
    producer = Producer(config)
    delivered = []

    def report(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(msg.offset())

    for i in range(request["count"]):
        producer.produce(request["topic"], key=str(i).encode(), value=b"v" * 1000, on_delivery=report)
    deadline = time.monotonic() + WAIT_S
    # librdkafka retries a refused login or handshake until its timeouts;
    # the first such error is the answer.
    while len(producer) > 0 and time.monotonic() < deadline and not refused(errors):
        producer.poll(0.2)
    if len(delivered) < request["count"]:
        print(json.dumps({"error": "; ".join(errors) or "records not delivered"}))
        return
    consumer = Consumer({**config, "group.id": "security-check", "auto.offset.reset": "earliest"})
    consumer.subscribe([request["topic"]])
    consumed = 0
    deadline = time.monotonic() + WAIT_S
    while consumed < request["count"] and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            errors.append(str(message.error()))
            continue
        consumed += 1
    consumer.close()
    print(json.dumps({"produced": len(delivered), "consumed": consumed, "errors": errors}))


if __name__ == "__main__":
    try:
        main()
    except KafkaException as e:
        print(json.dumps({"error": str(e)}))

"""Produce `count` records to `topic` with kafka-python under the given
Kafka-style client settings, then read them back in a group; prints one
JSON line: {"produced": n, "consumed": n} or {"error": "<what the client
said>", "error_name": "<the client's name for it>"}.

Reads {"bootstrap", "config", "topic", "count"} as JSON on stdin; `config`
holds `security.protocol`, `ssl.ca.location`, `sasl.mechanism`,
`sasl.username` and `sasl.password`, mapped here to kafka-python's options.
An optional "mode" does one half: "produce" ({"produced": n}) or
"consume" (up to `count` records as a member of "group", default
"security-check": {"consumed": n}).
"""

import json
import logging
import os
import re
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

# The whole run, refused or not, ends within this.
WAIT_S = 25.0
GROUP = "security-check"


class Collected(logging.Handler):
    """kafka-python logs why a connection failed (a refused login, a
    certificate it does not trust) and raises only "no brokers available";
    the logged reasons go into the error."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.reasons = []

    def emit(self, record):
        message = record.getMessage()
        if "not ready" in message:
            return
        message = re.sub(r" \(backoff [0-9.]+ secs\)", "", message)
        if message not in self.reasons and len(self.reasons) < 5:
            self.reasons.append(message)


def options(request):
    config = request["config"]
    out = {
        "bootstrap_servers": request["bootstrap"],
        "security_protocol": config.get("security.protocol", "PLAINTEXT"),
        "request_timeout_ms": 10000,
        "reconnect_backoff_max_ms": 1000,
        "bootstrap_timeout_ms": 10000,
    }
    if "ssl.ca.location" in config:
        out["ssl_cafile"] = config["ssl.ca.location"]
    if "sasl.mechanism" in config:
        out["sasl_mechanism"] = config["sasl.mechanism"]
        out["sasl_plain_username"] = config["sasl.username"]
        out["sasl_plain_password"] = config["sasl.password"]
    return out


def produce(request, reasons, deadline):
    producer = KafkaProducer(**options(request), max_block_ms=10000, linger_ms=5)
    futures = [
        producer.send(request["topic"], key=str(i).encode(), value=b"v" * 1000)
        for i in range(request["count"])
    ]
    producer.flush(timeout=max(1.0, deadline - time.monotonic()))
    produced = sum(1 for f in futures if f.succeeded())
    producer.close(timeout=5)
    if produced < request["count"]:
        failed = [f.exception for f in futures if f.failed()][:1]
        return {
            "error": "; ".join([str(e) for e in failed] + reasons.reasons) or "records not delivered",
            "error_name": type(failed[0]).__name__ if failed else None,
        }
    return {"produced": produced}


def consume(request, deadline):
    consumer = KafkaConsumer(
        request["topic"],
        **options(request),
        group_id=request.get("group", GROUP),
        auto_offset_reset="earliest",
    )
    consumed = 0
    try:
        while consumed < request["count"] and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                consumed += len(records)
    finally:
        consumer.close()
    return {"consumed": consumed}


def main(reasons):
    request = json.load(sys.stdin)
    deadline = time.monotonic() + WAIT_S - 5
    mode = request.get("mode", "round-trip")
    if mode == "consume":
        return consume(request, deadline)
    produced = produce(request, reasons, deadline)
    if mode == "produce" or "error" in produced:
        return produced
    return {**produced, **consume(request, deadline)}


def give_up(reasons):
    print(json.dumps({"error": "timed out; " + "; ".join(reasons.reasons)}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    reasons = Collected()
    logging.getLogger("kafka").addHandler(reasons)
    logging.getLogger("kafka").setLevel(logging.WARNING)
    watchdog = threading.Timer(WAIT_S, give_up, [reasons])
    watchdog.daemon = True
    watchdog.start()
    try:
        answer = main(reasons)
    except (KafkaError, OSError) as e:
        answer = {
            "error": "; ".join([f"{type(e).__name__}: {e}"] + reasons.reasons),
            "error_name": type(e).__name__,
        }
    print(json.dumps(answer), flush=True)
    os._exit(0)

"""Produce `count` records to `topic` with aiokafka under the given
Kafka-style client settings, then read them back in a group; prints one
JSON line: {"produced": n, "consumed": n} or {"error": "<what the client
said>", "error_name": "<the client's name for it>"}.

Reads {"bootstrap", "config", "topic", "count"} as JSON on stdin; `config`
holds `security.protocol`, `ssl.ca.location`, `sasl.mechanism`,
`sasl.username` and `sasl.password`, mapped here to aiokafka's options.
An optional "mode" does one half: "produce" ({"produced": n}) or
"consume" (up to `count` records as a member of "group", default
"security-check": {"consumed": n}).
"""

import asyncio
import json
import logging
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.helpers import create_ssl_context

# The whole run, refused or not, ends within this.
WAIT_S = 25.0
GROUP = "security-check"


class Collected(logging.Handler):
    """aiokafka logs why a connection failed (a refused login, a
    certificate it does not trust) and may raise only a connection error;
    the logged reasons go into the error."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.reasons = []

    def emit(self, record):
        message = record.getMessage()
        if message not in self.reasons:
            self.reasons.append(message)


def options(request):
    config = request["config"]
    out = {
        "bootstrap_servers": request["bootstrap"],
        "security_protocol": config.get("security.protocol", "PLAINTEXT"),
        "request_timeout_ms": 10000,
    }
    if "ssl.ca.location" in config:
        out["ssl_context"] = create_ssl_context(cafile=config["ssl.ca.location"])
    if "sasl.mechanism" in config:
        out["sasl_mechanism"] = config["sasl.mechanism"]
        out["sasl_plain_username"] = config["sasl.username"]
        out["sasl_plain_password"] = config["sasl.password"]
    return out


async def produce(request):
    producer = AIOKafkaProducer(**options(request), linger_ms=5)
    try:
        await producer.start()
        sent = [
            await producer.send(request["topic"], key=str(i).encode(), value=b"v" * 1000)
            for i in range(request["count"])
        ]
        return {"produced": len(await asyncio.gather(*sent))}
    finally:
        await producer.stop()


async def consume(request):
    consumer = AIOKafkaConsumer(
        request["topic"],
        **options(request),
        group_id=request.get("group", GROUP),
        auto_offset_reset="earliest",
    )
    consumed = 0
    try:
        await consumer.start()
        while consumed < request["count"]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                consumed += len(records)
    finally:
        await consumer.stop()
    return {"consumed": consumed}


async def run(request):
    mode = request.get("mode", "round-trip")
    if mode == "consume":
        return await consume(request)
    produced = await produce(request)
    if mode == "produce":
        return produced
    return {**produced, **await consume(request)}


async def main(reasons):
    request = json.load(sys.stdin)
    try:
        return await asyncio.wait_for(run(request), WAIT_S)
    except asyncio.TimeoutError:
        return {"error": "; ".join(["timed out"] + reasons.reasons)}
    except (KafkaError, OSError) as e:
        return {
            "error": "; ".join([f"{type(e).__name__}: {e}"] + reasons.reasons),
            "error_name": type(e).__name__,
        }


if __name__ == "__main__":
    reasons = Collected()
    logging.getLogger("aiokafka").addHandler(reasons)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    print(json.dumps(asyncio.run(main(reasons))), flush=True)

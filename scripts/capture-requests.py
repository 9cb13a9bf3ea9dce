#!/usr/bin/env python3
"""Records the request frames real Kafka clients send, as fuzz seeds.

Starts `strata serve` on 127.0.0.1:PORT advertising 127.0.0.2, and a
recording proxy on 127.0.0.2:PORT forwarding to it: clients bootstrap
through the proxy and, told by Metadata to connect to 127.0.0.2:PORT, keep
going through it. Then runs kcat, confluent-kafka, kafka-python and aiokafka
through a produce, a consume in a group with commits, metadata, admin calls
and a transaction. Every client-to-broker frame is written, deduplicated by
content, to

  OUT/request_frame/<sha1>   the frame as sent, size prefix included
  OUT/request_body/<sha1>    api key (1 byte), version (1 byte), body: the
                             frame with its size prefix and header removed

Usage: scripts/capture-requests.py STRATA_BINARY OUT_DIR
(run with the compatibility suite's venv, $STRATA_COMPAT_VENV/bin/python).
"""

import asyncio
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

BROKER_HOST = "127.0.0.1"
PROXY_HOST = "127.0.0.2"
TOPIC = "captured"
# Frames larger than this are left out: seeds stay small, and the fuzzer
# makes large inputs on its own.
FRAME_BYTES_MAX = 16 << 10

# First request version with a flexible (v2) request header, per API key,
# from Kafka's message schemas; absent keys are flexible from v0.
FLEXIBLE_FROM = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4,
    14: 4, 15: 5, 16: 3, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 24: 3, 25: 3,
    26: 3, 28: 3, 32: 4, 33: 2, 35: 2, 37: 2, 42: 2, 44: 1,
}


def uvarint(data, at):
    """An unsigned varint at `at`: (value, next position)."""
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def body_of(frame):
    """(api key, version, body) of a frame without its size prefix."""
    api = int.from_bytes(frame[0:2], "big", signed=True)
    version = int.from_bytes(frame[2:4], "big", signed=True)
    client_id = int.from_bytes(frame[8:10], "big", signed=True)
    at = 10 + max(client_id, 0)
    if version >= FLEXIBLE_FROM.get(api, 0):
        count, at = uvarint(frame, at)
        for _ in range(count):
            _tag, at = uvarint(frame, at)
            size, at = uvarint(frame, at)
            at += size
    return api, version, frame[at:]


class Recorder:
    def __init__(self, out):
        self.frames = os.path.join(out, "request_frame")
        self.bodies = os.path.join(out, "request_body")
        os.makedirs(self.frames, exist_ok=True)
        os.makedirs(self.bodies, exist_ok=True)
        self.lock = threading.Lock()
        self.seen = 0

    def record(self, frame):
        if len(frame) > FRAME_BYTES_MAX:
            return
        with self.lock:
            self.seen += 1
            write(self.frames, len(frame).to_bytes(4, "big") + frame)
            api, version, body = body_of(frame)
            if 0 <= api < 256 and 0 <= version < 256:
                write(self.bodies, bytes([api, version]) + body)


def write(directory, data):
    path = os.path.join(directory, hashlib.sha1(data).hexdigest())
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)


async def pipe(reader, writer, on_frame=None):
    buffered = b""
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
            if on_frame is None:
                continue
            buffered += data
            while len(buffered) >= 4:
                size = int.from_bytes(buffered[:4], "big")
                if len(buffered) < 4 + size:
                    break
                on_frame(buffered[4 : 4 + size])
                buffered = buffered[4 + size :]
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def run_proxy(port, recorder, ready):
    async def serve():
        async def connected(client_reader, client_writer):
            broker_reader, broker_writer = await asyncio.open_connection(BROKER_HOST, port)
            await asyncio.gather(
                pipe(client_reader, broker_writer, recorder.record),
                pipe(broker_reader, client_writer),
            )

        server = await asyncio.start_server(connected, PROXY_HOST, port)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def free_port():
    with socket.socket() as s:
        s.bind((BROKER_HOST, 0))
        return s.getsockname()[1]


def run(*args, stdin=None):
    subprocess.run(args, input=stdin, check=False, timeout=60, capture_output=True)


def kcat(bootstrap):
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(50))
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        run("kcat", "-b", bootstrap, "-P", "-t", TOPIC, "-K:", "-z", codec, stdin=lines)
    run("kcat", "-b", bootstrap, "-C", "-t", TOPIC, "-e", "-o", "beginning")
    run("kcat", "-b", bootstrap, "-L")
    run("kcat", "-b", bootstrap, "-G", "kcat-group", TOPIC, "-e")
    run("kcat", "-b", bootstrap, "-Q", "-t", f"{TOPIC}:0:1700000000000")


def confluent(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                      NewPartitions, NewTopic)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("admin-made", 2, 1)]).values():
        future.result()
    for future in admin.create_partitions([NewPartitions("admin-made", 3)]).values():
        future.result()
    resource = ConfigResource("topic", TOPIC)
    for future in admin.describe_configs([resource]).values():
        future.result()
    retention = ConfigEntry("retention.ms", "604800000",
                            incremental_operation=AlterConfigOpType.SET)
    altered = ConfigResource("topic", TOPIC, incremental_configs=[retention])
    for future in admin.incremental_alter_configs([altered]).values():
        future.result()
    admin.list_topics(timeout=10)
    admin.list_groups(timeout=10)

    for idempotent in [False, True]:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
                             "compression.type": "lz4", "linger.ms": 5})
        for i in range(20):
            producer.produce(TOPIC, key=b"c%d" % i, value=b"x" * i, headers=[("h", b"v")])
        producer.flush(10)

    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "capture-txn"})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce(TOPIC, value=b"in a transaction")
    txn.commit_transaction(10)
    txn.begin_transaction()
    txn.produce(TOPIC, value=b"aborted")
    txn.abort_transaction(10)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "confluent-group",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([TOPIC])
    deadline = time.time() + 15
    read = 0
    while time.time() < deadline and read < 50:
        message = consumer.poll(1)
        if message is not None and not message.error():
            read += 1
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
    consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.offsets_for_times([TopicPartition(TOPIC, 0, 1700000000000)], timeout=10)
    consumer.close()

    for future in admin.delete_topics(["admin-made"]).values():
        future.result()


def kafka_python(bootstrap):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for i in range(20):
        producer.send(TOPIC, key=b"kp%d" % i, value=b"kafka-python %d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="kafka-python-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    for _ in consumer:
        pass
    consumer.commit()
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    calls = [
        lambda: admin.list_groups(),
        lambda: admin.describe_groups(["kafka-python-group"]),
        lambda: admin.list_group_offsets("kafka-python-group"),
        lambda: admin.describe_cluster(),
        lambda: admin.describe_log_dirs(),
        lambda: admin.list_transactions(),
        lambda: admin.describe_transactions(["capture-txn"]),
        lambda: admin.describe_producers([TopicPartition(TOPIC, 0)]),
        lambda: admin.delete_records({TopicPartition(TOPIC, 0): 1}),
        lambda: admin.alter_configs([ConfigResource("TOPIC", TOPIC, {"retention.ms": "86400000"})]),
        lambda: admin.delete_groups(["kafka-python-group"]),
    ]
    for call in calls:
        try:
            call()
        except Exception as error:  # an unserved call still sent its request
            print(f"kafka-python admin: {error!r}", file=sys.stderr)
    admin.close()


def aiokafka(bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def go():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="zstd")
        await producer.start()
        for i in range(20):
            await producer.send_and_wait(TOPIC, b"aiokafka %d" % i, key=b"ak%d" % i)
        await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="aiokafka-group",
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            await asyncio.wait_for(consumer.getmany(timeout_ms=3000), 10)
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(go())


def main():
    binary, out = sys.argv[1], sys.argv[2]
    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="strata-capture-")
    broker = subprocess.Popen(
        [binary, "serve", "--listen", f"{BROKER_HOST}:{port}",
         "--advertised-host", PROXY_HOST, "--data-dir", data_dir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    recorder = Recorder(out)
    ready = threading.Event()
    threading.Thread(target=run_proxy, args=(port, recorder, ready), daemon=True).start()
    ready.wait(10)
    bootstrap = f"{PROXY_HOST}:{port}"
    try:
        time.sleep(1)
        for client in [kcat, confluent, kafka_python, aiokafka]:
            try:
                client(bootstrap)
            except Exception as error:  # one client failing leaves the others' frames
                print(f"{client.__name__}: {error!r}", file=sys.stderr)
    finally:
        broker.terminate()
        broker.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"{recorder.seen} frames seen", file=sys.stderr)


if __name__ == "__main__":
    main()

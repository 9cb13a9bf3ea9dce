"""Orders written by confluent-kafka's Avro, Protobuf and JSON Schema
serializers for the schema_orders example app to read, and its totals read
back with the matching deserializers, for tests/compat/schema_formats.rs.

One JSON request on stdin ({"op": ..., "bootstrap": ..., "url": ..., and
"auth": "USER:PASSWORD" and "ca": a CA file for a secured registry}), one JSON result
on stdout (see compat_common.py).

| op | result |
|---|---|
| `produce` | `orders` orders per format written; each customer's expected total |
| `read_totals` | per format, each customer's last total as the deserializer reads it |
"""

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from compat_common import Deadline, run

# The first version of the app's Order: no note yet.
ORDER_AVRO_V1 = (
    '{"type":"record","name":"Order","namespace":"shop","fields":['
    '{"name":"id","type":"long"},{"name":"customer","type":"string"},'
    '{"name":"amount","type":"double"}]}'
)
# The second, the app's own: a note added with a default (BACKWARD).
ORDER_AVRO_V2 = (
    '{"type":"record","name":"Order","namespace":"shop","fields":['
    '{"name":"id","type":"long"},{"name":"customer","type":"string"},'
    '{"name":"amount","type":"double"},'
    '{"name":"note","type":["null","string"],"default":null}]}'
)
ORDER_JSON = (
    '{"title":"Order","type":"object","properties":{"id":{"type":"integer"},'
    '"customer":{"type":"string"},"amount":{"type":"number"},'
    '"note":{"type":["string","null"]}},"required":["id","customer","amount"]}'
)
CUSTOMERS = 7
FORMATS = ("avro", "protobuf", "json")


def registry(request):
    config = {"url": request["url"]}
    if request.get("auth"):
        config["basic.auth.user.info"] = request["auth"]
    if request.get("ca"):
        config["ssl.ca.location"] = request["ca"]
    return SchemaRegistryClient(config)


def shop_classes():
    """shop.Order and shop.CustomerTotal, built at run time from a
    FileDescriptorProto (no protoc), as the app's .proto declares them."""
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    order.field.add(name="customer", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    order.field.add(name="amount", number=3, type=field.TYPE_DOUBLE, label=field.LABEL_OPTIONAL)
    order.field.add(name="note", number=4, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    total = file.message_type.add(name="CustomerTotal")
    total.field.add(name="customer", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    total.field.add(name="orders", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    total.field.add(name="total", number=3, type=field.TYPE_DOUBLE, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    get = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return get("shop.Order"), get("shop.CustomerTotal")


def produce(request):
    sr = registry(request)
    count = request["orders"]
    Order, _ = shop_classes()
    avro_v1 = AvroSerializer(sr, ORDER_AVRO_V1)
    avro_v2 = AvroSerializer(sr, ORDER_AVRO_V2)
    proto = ProtobufSerializer(Order, sr)
    json_schema = JSONSerializer(ORDER_JSON, sr)
    producer = Producer({"bootstrap.servers": request["bootstrap"], "enable.idempotence": True})
    expected = {}
    for i in range(count):
        customer = f"customer-{i % CUSTOMERS}"
        amount = (i % 50) + 0.25
        seen = expected.setdefault(customer, [0, 0.0])
        seen[0] += 1
        seen[1] += amount
        order = {"id": i, "customer": customer, "amount": amount}
        # The first half written with the first schema, the rest with the
        # second: the app reads both as the second.
        avro = avro_v1 if i < count // 2 else avro_v2
        if i >= count // 2:
            order = dict(order, note=f"note {i}")
        values = {
            "avro": avro(order, SerializationContext("orders-avro", MessageField.VALUE)),
            "protobuf": proto(
                Order(**order), SerializationContext("orders-protobuf", MessageField.VALUE)
            ),
            "json": json_schema(order, SerializationContext("orders-json", MessageField.VALUE)),
        }
        for fmt, value in values.items():
            producer.produce(f"orders-{fmt}", key=customer.encode(), value=value)
        producer.poll(0)
    if producer.flush(60) != 0:
        raise TimeoutError("orders not delivered within 60 s")
    return {
        "expected": expected,
        "avro_versions": sr.get_versions("orders-avro-value"),
    }


def read_totals(request):
    sr = registry(request)
    _, CustomerTotal = shop_classes()
    readers = {
        "avro": AvroDeserializer(sr),
        "protobuf": ProtobufDeserializer(CustomerTotal, {}, sr),
        "json": JSONDeserializer(None, schema_registry_client=sr),
    }
    out = {}
    for fmt in FORMATS:
        topic = f"customer-totals-{fmt}"
        consumer = Consumer({
            "bootstrap.servers": request["bootstrap"],
            "group.id": f"read-{fmt}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        })
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        left, last = set(partitions), {}
        deadline = Deadline()
        while left:
            deadline.check(f"{topic} read to the end")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    left.discard(msg.partition())
                    continue
                raise KafkaException(msg.error())
            ctx = SerializationContext(topic, MessageField.VALUE)
            value = readers[fmt](msg.value(), ctx)
            if fmt == "protobuf":
                value = {"customer": value.customer, "orders": value.orders, "total": value.total}
            if msg.key().decode() != value["customer"]:
                raise AssertionError(f"{topic}: key {msg.key()!r} holds {value}")
            last[value["customer"]] = [value["orders"], value["total"]]
        consumer.close()
        out[fmt] = last
    return out


run({"produce": produce, "read_totals": read_totals})

"""confluent-kafka's schema registry client and serializers against
`strata serve --schema-registry`, for tests/compat/schema_registry.rs.

One JSON request on stdin ({"op": ..., "url": ...}), one JSON result on
stdout (see compat_common.py). Each op runs a whole scenario and reports
what the client saw; the Rust test compares it with what Confluent's
registry answers. A SchemaRegistryError where none is expected raises,
which fails the test with its traceback.

| op | result |
|---|---|
| `clients` | what registering, reading, evolving, refusing and deleting answered |
| `serializers` | Avro, Protobuf and JSON Schema values serialized and read back |
| `populate` | ids registered before a restart |
| `verify` | what the registry answers after the restart |
| `secured` | with `token`: what a client without it and one sending it by HTTP Basic get |
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from compat_common import run

USER_V1 = '{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}'
# Adds a field with a default: BACKWARD compatible.
USER_V2 = (
    '{"type":"record","name":"User","fields":[{"name":"name","type":"string"},'
    '{"name":"age","type":"int","default":0}]}'
)
# Adds a field without one: new readers cannot read old data.
USER_BAD = (
    '{"type":"record","name":"User","fields":[{"name":"name","type":"string"},'
    '{"name":"age","type":"int","default":0},{"name":"email","type":"string"}]}'
)
ORDER_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order { string id = 1; int64 cents = 2; }\n'
ORDER_PROTO_BAD = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; int64 cents = 2; }\n'
PAYMENT_JSON = (
    '{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",'
    '"properties":{"amount":{"type":"number"},"currency":{"type":"string"}},'
    '"required":["amount"],"additionalProperties":false}'
)


def client(request):
    return SchemaRegistryClient({"url": request["url"]})


def refusal(call):
    """The status, code and message of the SchemaRegistryError `call` raises."""
    try:
        call()
    except SchemaRegistryError as error:
        return {"status": error.http_status_code, "code": error.error_code, "message": error.error_message}
    raise AssertionError("the registry accepted what it should refuse")


def clients(request):
    sr = client(request)
    out = {"types": sr.get_schema_types()}
    user_id = sr.register_schema("users-value", Schema(USER_V1, "AVRO"))
    out["user_id"] = user_id
    # A fresh client: its cache cannot answer for the server.
    out["user_id_again"] = client(request).register_schema("users-value", Schema(USER_V1, "AVRO"))
    out["other_subject_id"] = sr.register_schema("accounts-value", Schema(USER_V1, "AVRO"))
    fetched = client(request).get_schema(user_id)
    out["by_id"] = {"schema": fetched.schema_str, "type": fetched.schema_type}
    out["lookup_version"] = client(request).lookup_schema("users-value", Schema(USER_V1, "AVRO")).version
    out["compatible_v2"] = sr.test_compatibility("users-value", Schema(USER_V2, "AVRO"))
    out["compatible_bad"] = sr.test_compatibility("users-value", Schema(USER_BAD, "AVRO"))
    out["evolved_id"] = sr.register_schema("users-value", Schema(USER_V2, "AVRO"))
    out["versions"] = sr.get_versions("users-value")
    latest = sr.get_latest_version("users-value")
    out["latest"] = {"version": latest.version, "id": latest.schema_id}
    out["version_1_id"] = sr.get_version("users-value", 1).schema_id
    out["id_versions"] = sorted(
        [v.subject, v.version] for v in sr.get_schema_versions(user_id)
    )
    out["incompatible"] = refusal(lambda: sr.register_schema("users-value", Schema(USER_BAD, "AVRO")))
    out["invalid"] = refusal(lambda: sr.register_schema("users-value", Schema('{"type":"record"}', "AVRO")))
    out["missing_subject"] = refusal(lambda: sr.get_latest_version("nobody"))
    out["missing_id"] = refusal(lambda: client(request).get_schema(999))
    # Compatibility levels.
    out["global_level"] = sr.get_compatibility()
    out["unset_subject_level"] = refusal(lambda: sr.get_compatibility("users-value"))
    out["set_level"] = sr.set_compatibility("users-value", "NONE")
    out["subject_level"] = sr.get_compatibility("users-value")
    out["accepted_under_none"] = sr.register_schema("users-value", Schema(USER_BAD, "AVRO"))
    out["bad_level"] = refusal(lambda: sr.set_compatibility("users-value", "SIDEWAYS"))
    # Protobuf and JSON Schema registered by text.
    out["proto_id"] = sr.register_schema("orders-value", Schema(ORDER_PROTO, "PROTOBUF"))
    out["proto_incompatible"] = refusal(
        lambda: sr.register_schema("orders-value", Schema(ORDER_PROTO_BAD, "PROTOBUF"))
    )
    out["json_id"] = sr.register_schema("payments-value", Schema(PAYMENT_JSON, "JSON"))
    out["json_invalid"] = refusal(lambda: sr.register_schema("payments-value", Schema('{"type": 5}', "JSON")))
    out["subjects"] = sorted(sr.get_subjects())
    # Soft, then permanent, deletes.
    out["hard_first"] = refusal(lambda: sr.delete_subject("accounts-value", permanent=True))
    out["soft_deleted"] = sr.delete_subject("accounts-value")
    out["after_soft"] = refusal(lambda: sr.get_versions("accounts-value"))
    out["listed_after_soft"] = "accounts-value" in sr.get_subjects()
    out["listed_with_deleted"] = "accounts-value" in sr.get_subjects(deleted=True)
    out["hard_deleted"] = sr.delete_subject("accounts-value", permanent=True)
    out["listed_after_hard"] = "accounts-value" in sr.get_subjects(deleted=True)
    out["version_soft_deleted"] = sr.delete_version("users-value", 3)
    out["version_hard_first"] = refusal(lambda: sr.delete_version("users-value", 2, permanent=True))
    out["version_hard_deleted"] = sr.delete_version("users-value", 3, permanent=True)
    out["versions_at_end"] = sr.get_versions("users-value")
    return out


def order_class():
    """shop.Order built at run time from a FileDescriptorProto (no protoc)."""
    file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    message.field.add(name="cents", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def serializers(request):
    sr = client(request)
    out = {}
    # Avro, and a second writer schema the reader resolves.
    ctx = SerializationContext("users", MessageField.VALUE)
    v1 = AvroSerializer(sr, USER_V1)(({"name": "ada"}), ctx)
    v2 = AvroSerializer(sr, USER_V2)(({"name": "bob", "age": 36}), ctx)
    reader = AvroDeserializer(client(request))
    out["avro"] = {
        "ids": [int.from_bytes(v1[1:5], "big"), int.from_bytes(v2[1:5], "big")],
        "values": [reader(v1, ctx), reader(v2, ctx)],
        "versions": sr.get_versions("users-value"),
    }
    # Protobuf: the serializer registers a base64 descriptor; the
    # deserializer fetches it back as one (format=serialized).
    Order = order_class()
    ctx = SerializationContext("orders", MessageField.VALUE)
    data = ProtobufSerializer(Order, sr)(Order(id="o-1", cents=1250), ctx)
    read = ProtobufDeserializer(Order, {}, client(request))(data, ctx)
    registered = sr.get_latest_version("orders-value")
    out["protobuf"] = {
        "id": registered.schema_id,
        "type": registered.schema.schema_type,
        "value": {"id": read.id, "cents": read.cents},
    }
    # The same schema as text is the same subject's next version only if
    # it differs: compatible either way.
    out["protobuf_text_compatible"] = sr.test_compatibility("orders-value", Schema(ORDER_PROTO, "PROTOBUF"))
    # JSON Schema.
    ctx = SerializationContext("payments", MessageField.VALUE)
    data = JSONSerializer(PAYMENT_JSON, sr)({"amount": 12.5, "currency": "EUR"}, ctx)
    read = JSONDeserializer(None, schema_registry_client=client(request))(data, ctx)
    out["json"] = {"id": int.from_bytes(data[1:5], "big"), "value": read}
    return out


def populate(request):
    sr = client(request)
    ids = {
        "users-value": sr.register_schema("users-value", Schema(USER_V1, "AVRO")),
        "orders-value": sr.register_schema("orders-value", Schema(ORDER_PROTO, "PROTOBUF")),
        "gone-value": sr.register_schema("gone-value", Schema('"string"', "AVRO")),
    }
    sr.register_schema("users-value", Schema(USER_V2, "AVRO"))
    sr.set_compatibility("users-value", "FULL_TRANSITIVE")
    sr.delete_subject("gone-value")
    sr.delete_subject("gone-value", permanent=True)
    return {"ids": ids}


def verify(request):
    sr = client(request)
    return {
        "subjects": sorted(sr.get_subjects()),
        "users_versions": sr.get_versions("users-value"),
        "users_v1": sr.get_version("users-value", 1).schema.schema_str,
        "orders_type": sr.get_latest_version("orders-value").schema.schema_type,
        "level": sr.get_compatibility("users-value"),
        "gone": refusal(lambda: sr.get_versions("gone-value", deleted=True)),
        "new_id": sr.register_schema("fresh-value", Schema('"long"', "AVRO")),
    }


def secured(request):
    anonymous = client(request)
    signed_in = SchemaRegistryClient({"url": request["url"], "basic.auth.user.info": "strata:" + request["token"]})
    return {
        "anonymous": refusal(lambda: anonymous.register_schema("s-value", Schema('"string"', "AVRO"))),
        "signed_in_id": signed_in.register_schema("s-value", Schema('"string"', "AVRO")),
        "signed_in_subjects": signed_in.get_subjects(),
    }


if __name__ == "__main__":
    run({"clients": clients, "serializers": serializers, "populate": populate, "verify": verify, "secured": secured})

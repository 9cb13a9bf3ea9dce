"""librdkafka's mock Kafka cluster, driven by line commands on stdin.

Loads the librdkafka that the confluent-kafka wheel bundles (in the venv's
site-packages, `confluent_kafka.libs/`; STRATA_LIBRDKAFKA names another
file), creates a cluster of `--brokers` brokers hosted by a producer handle,
and prints one line, `bootstrap HOST:PORT,...`. Then each line read is one
command, answered with one line: `ok` (with a value for some), or
`error MESSAGE`. End of input or `quit` destroys the cluster.

| command | C function |
|---|---|
| `topic NAME PARTITIONS REPLICATION` | rd_kafka_mock_topic_create |
| `leader TOPIC PARTITION BROKER` | rd_kafka_mock_partition_set_leader |
| `down BROKER` / `up BROKER` | rd_kafka_mock_broker_set_down / _up |
| `errors API_KEY CODE...` | rd_kafka_mock_push_request_errors_array |
| `clear_errors API_KEY` | rd_kafka_mock_clear_request_errors |
| `broker_errors BROKER API_KEY CODE:RTT_MS...` | rd_kafka_mock_broker_push_request_error_rtts (CODE 0 with an RTT delays the answer) |
| `error_count BROKER API_KEY` | rd_kafka_mock_broker_error_stack_cnt: answers `ok COUNT` |
| `topic_error TOPIC CODE` | rd_kafka_mock_topic_set_error (0 clears) |
| `coordinator group|transaction KEY BROKER` | rd_kafka_mock_coordinator_set |
| `apiversion API_KEY MIN MAX` | rd_kafka_mock_set_apiversion |
| `rebalance_delay MS` | rd_kafka_mock_group_initial_rebalance_delay_ms |
| `track` | rd_kafka_mock_start_request_tracking |
| `requests` | rd_kafka_mock_get_requests, then _clear_requests: answers `ok BROKER:API_KEY:COUNT ...` |

STRATA_MOCK_DEBUG (a librdkafka `debug` list, as `mock,protocol`) logs
what the brokers see to stderr.

An error code -195 (librdkafka's __TRANSPORT) makes the broker close the
connection the request came on instead of answering it.

The signatures below are librdkafka's (rdkafka.h, rdkafka_mock.h).
"""

import argparse
import ctypes
import glob
import os
import sys
import sysconfig

RD_KAFKA_PRODUCER = 0
ERRSTR_BYTES = 512


def find_library():
    named = os.environ.get("STRATA_LIBRDKAFKA")
    if named:
        return named
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for site in sorted(dirs):
        found = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
        if found:
            return found[0]
    raise SystemExit(
        f"no librdkafka in confluent_kafka.libs/ under {sorted(dirs)}: "
        "install the compatibility clients (make deps)"
    )


def load(path):
    lib = ctypes.CDLL(path)
    p = ctypes.c_void_p
    s = ctypes.c_char_p
    i16, i32 = ctypes.c_int16, ctypes.c_int32
    size = ctypes.c_size_t
    signatures = {
        # rd_kafka_conf_t *rd_kafka_conf_new(void)
        "rd_kafka_conf_new": ([], p),
        # rd_kafka_conf_res_t rd_kafka_conf_set(conf, name, value, errstr, size)
        "rd_kafka_conf_set": ([p, s, s, s, size], ctypes.c_int),
        # rd_kafka_t *rd_kafka_new(type, conf, errstr, errstr_size)
        "rd_kafka_new": ([ctypes.c_int, p, s, size], p),
        "rd_kafka_destroy": ([p], None),
        # rd_kafka_mock_cluster_t *rd_kafka_mock_cluster_new(rk, int broker_cnt)
        "rd_kafka_mock_cluster_new": ([p, ctypes.c_int], p),
        "rd_kafka_mock_cluster_destroy": ([p], None),
        "rd_kafka_mock_cluster_bootstraps": ([p], s),
        # (mcluster, topic, partition_cnt, replication_factor)
        "rd_kafka_mock_topic_create": ([p, s, ctypes.c_int, ctypes.c_int], ctypes.c_int),
        # (mcluster, topic, int32 partition, int32 broker_id)
        "rd_kafka_mock_partition_set_leader": ([p, s, i32, i32], ctypes.c_int),
        "rd_kafka_mock_broker_set_down": ([p, i32], ctypes.c_int),
        "rd_kafka_mock_broker_set_up": ([p, i32], ctypes.c_int),
        # void (mcluster, int16 ApiKey, size_t cnt, const rd_kafka_resp_err_t *errors)
        "rd_kafka_mock_push_request_errors_array": ([p, i16, size, ctypes.POINTER(ctypes.c_int)], None),
        "rd_kafka_mock_clear_request_errors": ([p, i16], None),
        # (mcluster, int32 broker_id, int16 ApiKey, size_t *cntp)
        "rd_kafka_mock_broker_error_stack_cnt": ([p, i32, i16, ctypes.POINTER(size)], ctypes.c_int),
        # void (mcluster, topic, rd_kafka_resp_err_t err)
        "rd_kafka_mock_topic_set_error": ([p, s, ctypes.c_int], None),
        # (mcluster, const char *key_type, const char *key, int32 broker_id)
        "rd_kafka_mock_coordinator_set": ([p, s, s, i32], ctypes.c_int),
        # (mcluster, int16 ApiKey, int16 MinVersion, int16 MaxVersion)
        "rd_kafka_mock_set_apiversion": ([p, i16, i16, i16], ctypes.c_int),
        "rd_kafka_mock_group_initial_rebalance_delay_ms": ([p, i32], None),
        "rd_kafka_mock_start_request_tracking": ([p], None),
        "rd_kafka_mock_clear_requests": ([p], None),
        # rd_kafka_mock_request_t **(mcluster, size_t *cntp)
        "rd_kafka_mock_get_requests": ([p, ctypes.POINTER(size)], ctypes.POINTER(p)),
        "rd_kafka_mock_request_destroy_array": ([ctypes.POINTER(p), size], None),
        "rd_kafka_mock_request_id": ([p], i32),
        "rd_kafka_mock_request_api_key": ([p], i16),
        # const char *rd_kafka_err2name(rd_kafka_resp_err_t)
        "rd_kafka_err2name": ([ctypes.c_int], s),
    }
    for name, (args, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = args
        function.restype = result
    # (mcluster, int32 broker_id, int16 ApiKey, size_t cnt, ...): variadic,
    # cnt tuples of (rd_kafka_resp_err_t err, int rtt_ms); its fixed
    # arguments are converted by hand at each call.
    lib.rd_kafka_mock_broker_push_request_error_rtts.restype = ctypes.c_int
    return lib


class Mock:
    def __init__(self, lib, brokers):
        self.lib = lib
        errstr = ctypes.create_string_buffer(ERRSTR_BYTES)
        conf = lib.rd_kafka_conf_new()
        # The host handle talks to no broker of its own; only its errors
        # are worth a line.
        lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, ERRSTR_BYTES)
        # STRATA_MOCK_DEBUG=mock,protocol logs every request the brokers see.
        debug = os.environ.get("STRATA_MOCK_DEBUG")
        if debug:
            lib.rd_kafka_conf_set(conf, b"log_level", b"7", errstr, ERRSTR_BYTES)
            lib.rd_kafka_conf_set(conf, b"debug", debug.encode(), errstr, ERRSTR_BYTES)
        self.rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, ERRSTR_BYTES)
        if not self.rk:
            raise SystemExit(f"rd_kafka_new: {errstr.value.decode()}")
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        if not self.mc:
            raise SystemExit("rd_kafka_mock_cluster_new failed")

    def close(self):
        self.lib.rd_kafka_mock_cluster_destroy(self.mc)
        self.lib.rd_kafka_destroy(self.rk)

    def checked(self, err):
        if err != 0:
            raise ValueError(self.lib.rd_kafka_err2name(err).decode())
        return "ok"

    def run(self, words):
        lib, mc = self.lib, self.mc
        op, args = words[0], words[1:]
        if op == "topic":
            name, partitions, replication = args
            return self.checked(lib.rd_kafka_mock_topic_create(mc, name.encode(), int(partitions), int(replication)))
        if op == "leader":
            topic, partition, broker = args
            return self.checked(lib.rd_kafka_mock_partition_set_leader(mc, topic.encode(), int(partition), int(broker)))
        if op == "down":
            return self.checked(lib.rd_kafka_mock_broker_set_down(mc, int(args[0])))
        if op == "up":
            return self.checked(lib.rd_kafka_mock_broker_set_up(mc, int(args[0])))
        if op == "errors":
            api_key, codes = int(args[0]), [int(c) for c in args[1:]]
            if not codes:
                raise ValueError("errors needs at least one code")
            array = (ctypes.c_int * len(codes))(*codes)
            lib.rd_kafka_mock_push_request_errors_array(mc, api_key, len(codes), array)
            return "ok"
        if op == "broker_errors":
            broker, api_key, tuples = int(args[0]), int(args[1]), args[2:]
            if not tuples:
                raise ValueError("broker_errors needs at least one CODE:RTT_MS")
            varargs = []
            for pair in tuples:
                code, rtt = pair.split(":")
                varargs += [ctypes.c_int(int(code)), ctypes.c_int(int(rtt))]
            return self.checked(lib.rd_kafka_mock_broker_push_request_error_rtts(
                ctypes.c_void_p(mc), ctypes.c_int32(broker), ctypes.c_int16(api_key), ctypes.c_size_t(len(tuples)), *varargs))
        if op == "error_count":
            broker, api_key = int(args[0]), int(args[1])
            count = ctypes.c_size_t(0)
            self.checked(lib.rd_kafka_mock_broker_error_stack_cnt(mc, broker, api_key, ctypes.byref(count)))
            return f"ok {count.value}"
        if op == "clear_errors":
            lib.rd_kafka_mock_clear_request_errors(mc, int(args[0]))
            return "ok"
        if op == "topic_error":
            topic, code = args
            lib.rd_kafka_mock_topic_set_error(mc, topic.encode(), int(code))
            return "ok"
        if op == "coordinator":
            key_type, key, broker = args
            if key_type not in ("group", "transaction"):
                raise ValueError(f"coordinator type {key_type!r} is neither group nor transaction")
            return self.checked(lib.rd_kafka_mock_coordinator_set(mc, key_type.encode(), key.encode(), int(broker)))
        if op == "apiversion":
            api_key, low, high = (int(a) for a in args)
            return self.checked(lib.rd_kafka_mock_set_apiversion(mc, api_key, low, high))
        if op == "rebalance_delay":
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mc, int(args[0]))
            return "ok"
        if op == "track":
            lib.rd_kafka_mock_start_request_tracking(mc)
            return "ok"
        if op == "requests":
            return "ok " + self.requests()
        raise ValueError(f"unknown command {op!r}")

    def requests(self):
        lib, mc = self.lib, self.mc
        count = ctypes.c_size_t(0)
        array = lib.rd_kafka_mock_get_requests(mc, ctypes.byref(count))
        seen = {}
        for i in range(count.value):
            key = (lib.rd_kafka_mock_request_id(array[i]), lib.rd_kafka_mock_request_api_key(array[i]))
            seen[key] = seen.get(key, 0) + 1
        if count.value:
            lib.rd_kafka_mock_request_destroy_array(array, count.value)
        lib.rd_kafka_mock_clear_requests(mc)
        return " ".join(f"{broker}:{api}:{n}" for (broker, api), n in sorted(seen.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3)
    options = parser.parse_args()
    mock = Mock(load(find_library()), options.brokers)
    print("bootstrap " + mock.lib.rd_kafka_mock_cluster_bootstraps(mock.mc).decode(), flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words == ["quit"]:
                break
            try:
                answer = mock.run(words)
            except (ValueError, TypeError) as error:
                answer = f"error {words[0]}: {error}"
            print(answer, flush=True)
    finally:
        mock.close()


if __name__ == "__main__":
    main()

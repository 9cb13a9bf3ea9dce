"""What the Python drivers share: the protocol with the Rust harness.

A driver reads one JSON request on stdin ({"op": ..., "bootstrap": ...,
op-specific fields}), runs it with its client and prints one JSON result on
stdout. Bytes travel as lowercase hex (None stays null), so keys, values and
headers compare byte for byte. Any failure raises: the traceback goes to
stderr and the exit status is non-zero, which fails the Rust test.
"""

import json
import sys
import time

# How long any wait inside a driver may take before it fails; the Rust side
# kills a driver that outlives its own, longer, limit.
WAIT_S = 60.0


def unhex(text):
    return None if text is None else bytes.fromhex(text)


def tohex(data):
    return None if data is None else bytes(data).hex()


def record(partition, offset, timestamp, key, value, headers):
    """One consumed record, as the harness compares it."""
    return {
        "partition": partition,
        "offset": offset,
        "timestamp": timestamp,
        "key": tohex(key),
        "value": tohex(value),
        "headers": [[name, tohex(v)] for name, v in (headers or [])],
    }


def header_pairs(spec):
    """A record spec's headers as (str, bytes) pairs."""
    return [(name, unhex(value)) for name, value in spec["headers"]]


class Deadline:
    def __init__(self, seconds=WAIT_S):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def check(self, what):
        if time.monotonic() > self.end:
            raise TimeoutError(f"gave up after {WAIT_S}s waiting for {what}")


def sort_records(records):
    return sorted(records, key=lambda r: (r["partition"], r["offset"]))


def run(ops):
    request = json.load(sys.stdin)
    op = request["op"]
    if op not in ops:
        raise SystemExit(f"unknown op {op!r}; this driver knows {sorted(ops)}")
    result = ops[op](request)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


# The ops every Python driver implements, by function name.
COMMON_OPS = (
    "create_topics",
    "list_topics",
    "produce",
    "consume",
    "offsets_for_times",
    "seek",
    "out_of_range",
    "group",
    "committed",
)


def run_driver(namespace, extra=(), wrap=None):
    """Runs the op a request names, from the driver module's `namespace`:
    the common ops plus `extra`; `wrap` turns an op's return value into the
    result (asyncio.run for async drivers)."""
    ops = {name: namespace[name] for name in (*COMMON_OPS, *extra)}
    if wrap is not None:
        ops = {name: (lambda request, op=op: wrap(op(request))) for name, op in ops.items()}
    run(ops)


def seek_result(low, high, last, first, appended):
    """The seek op's answer: the partition's offsets and the records read
    after each seek."""
    return {
        "low": low,
        "high": high,
        "last": last["offset"],
        "after_beginning": first["offset"],
        "after_end": appended["offset"],
    }

"""A Quix Streams word count run with processing_guarantee="exactly-once",
for the compatibility suite (tests/compat/quix.rs): it counts each word of
`input` (the record key is the word) in Quix's RocksDB state, backed by its
compacted changelog topic, and writes {"word", "count"} to `output`. The
harness kills it with SIGKILL, starts it again, and deletes its local
state to make it restore from the changelog; exactly once means every
word's outputs are the counts 1..n, each once.

Configuration: one JSON object on stdin (bootstrap, input, output, group,
state_dir, idle_s). Exits once no new input arrived for idle_s seconds.
"""

import json
import sys

from quixstreams import Application


def main():
    config = json.load(sys.stdin)
    app = Application(
        broker_address=config["bootstrap"],
        consumer_group=config["group"],
        processing_guarantee="exactly-once",
        auto_offset_reset="earliest",
        state_dir=config["state_dir"],
        commit_interval=0.5,
        loglevel="WARNING",
    )
    words = app.topic(config["input"], key_deserializer="str", value_deserializer="str")
    counts = app.topic(config["output"], key_serializer="str", value_serializer="json")

    def count(word, state):
        n = state.get("count", 0) + 1
        state.set("count", n)
        return {"word": word, "count": n}

    app.dataframe(words).apply(count, stateful=True).to_topic(counts)
    app.run(timeout=config["idle_s"])


if __name__ == "__main__":
    main()

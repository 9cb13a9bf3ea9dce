/*
 * Load driver for the broker benchmark (benches/broker.rs), on librdkafka.
 *
 * kcat -P parses stdin line by line; this driver hands librdkafka records
 * straight from memory, so the client costs only what librdkafka itself
 * costs. The harness runs both and reports which one limits a case.
 *
 *   rdkafka_driver produce BROKERS TOPIC RECORDS RECORD_BYTES ACKS PRODUCERS
 *                  [idempotent] [txn_ms=MS] [keys=N] [rate=N]
 *       PRODUCERS threads, each with its own producer (own connection),
 *       each sending RECORDS records of RECORD_BYTES to partition 0.
 *       `idempotent`: enable.idempotence (acks=all). `txn_ms=MS`: a
 *       transactional producer (its own transactional.id) committing a
 *       transaction every MS milliseconds. `keys=N`: records keyed with N
 *       distinct keys (for compacted topics); unkeyed otherwise.
 *       `rate=N`: each producer paced to N records per second (as fast as
 *       it can otherwise).
 *   rdkafka_driver consume BROKERS TOPIC [read_committed]
 *       reads partition 0 from the log start to its end as seen at start
 *       (the legacy consumer, as kcat -C uses, no group), read_uncommitted
 *       unless asked.
 *   rdkafka_driver alter BROKERS TOPIC KEY=VALUE...
 *       sets the topic's configuration to these entries (AlterConfigs).
 *
 * produce and consume print one line: "records=N bytes=N seconds=F", and
 * produce adds "rtt_p99_us=N": the worst 99th percentile of the broker
 * round trips (every request type; librdkafka's statistics, per 500 ms
 * window) any producer saw, 0 if no window ended during the run. Only the payload bytes (record values) are counted.
 * Timing starts once every producer has connected and delivered one
 * warm-up record, and ends when the last producer has had every record
 * acknowledged (and its last transaction committed). Exit status 1 on any
 * delivery failure.
 */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Upper bound on producers: one thread and one connection each. */
#define PRODUCERS_MAX 64
/* Upper bound on one record, to keep the payload buffer small. */
#define RECORD_BYTES_MAX (1 << 20)

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *detail) {
  fprintf(stderr, "rdkafka_driver: %s: %s\n", what, detail);
  exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
  char error[256];
  if (rd_kafka_conf_set(conf, key, value, error, sizeof error) !=
      RD_KAFKA_CONF_OK)
    die(key, error);
}

struct producer_job {
  const char *brokers;
  const char *topic;
  const char *acks;
  long records;
  const char *payload;
  size_t record_bytes;
  pthread_barrier_t *start;
  int idempotent;
  long txn_ms; /* 0: not transactional */
  long keys;   /* 0: unkeyed */
  long rate;   /* records per second; 0: unpaced */
  int index;
  long failed;       /* delivery reports with an error */
  long rtt_p99_us;   /* worst window seen */
};

/* The worst "p99" of the statistics' "rtt" objects that counted requests
   ({"min":..,"p99":..,"cnt":..}: flat objects, so the first '}' ends
   one). */
static long worst_rtt_p99(const char *json) {
  long worst = 0;
  for (const char *p = strstr(json, "\"rtt\":"); p; p = strstr(p + 6, "\"rtt\":")) {
    const char *end = strchr(p, '}');
    const char *p99 = strstr(p, "\"p99\":");
    const char *cnt = strstr(p, "\"cnt\":");
    if (!end || !p99 || !cnt || p99 > end || cnt > end)
      continue;
    long value = atol(p99 + 6);
    if (atol(cnt + 6) > 0 && value > worst)
      worst = value;
  }
  return worst;
}

static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
  (void)rk, (void)len;
  struct producer_job *job = opaque;
  long worst = worst_rtt_p99(json);
  if (worst > job->rtt_p99_us)
    job->rtt_p99_us = worst;
  return 0; /* librdkafka frees the JSON */
}

static void check(rd_kafka_error_t *error, const char *what) {
  if (error) {
    fprintf(stderr, "rdkafka_driver: %s: %s\n", what,
            rd_kafka_error_string(error));
    exit(1);
  }
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *message,
                        void *opaque) {
  (void)rk;
  struct producer_job *job = opaque;
  if (message->err) {
    if (job->failed++ == 0)
      fprintf(stderr, "rdkafka_driver: delivery failed: %s\n",
              rd_kafka_err2str(message->err));
  }
}

static void produce_one(rd_kafka_t *rk, struct producer_job *job, long i) {
  char key[32];
  size_t key_len = 0;
  if (job->keys > 0)
    key_len = (size_t)snprintf(key, sizeof key, "key-%08ld",
                               (i * 7919 + job->index) % job->keys);
  for (;;) {
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(job->topic), RD_KAFKA_V_PARTITION(0),
        RD_KAFKA_V_KEY(key_len ? key : NULL, key_len),
        RD_KAFKA_V_VALUE((void *)job->payload, job->record_bytes),
        RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
      return;
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
      die("produce", rd_kafka_err2str(err));
    /* The local queue is full: serve delivery reports until there is room. */
    rd_kafka_poll(rk, 1);
  }
}

static void *run_producer(void *arg) {
  struct producer_job *job = arg;
  char error[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", job->brokers);
  set(conf, "acks", job->acks);
  set(conf, "compression.type", "none");
  set(conf, "enable.idempotence",
      job->idempotent || job->txn_ms ? "true" : "false");
  if (job->txn_ms) {
    char id[256];
    snprintf(id, sizeof id, "bench-%s-%d", job->topic, job->index);
    set(conf, "transactional.id", id);
  }
  /* Enough room that the queue limit is not what paces the producer. */
  set(conf, "queue.buffering.max.messages", "1000000");
  set(conf, "queue.buffering.max.kbytes", "1048576");
  set(conf, "statistics.interval.ms", "500");
  rd_kafka_conf_set_opaque(conf, job);
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_stats_cb(conf, on_stats);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (!rk)
    die("creating a producer", error);
  /* Warm-up: connection, metadata, topic creation (and the producer id). */
  if (job->txn_ms) {
    check(rd_kafka_init_transactions(rk, 30000), "init_transactions");
    check(rd_kafka_begin_transaction(rk), "begin_transaction");
  }
  produce_one(rk, job, 0);
  if (job->txn_ms)
    check(rd_kafka_commit_transaction(rk, 30000), "commit_transaction");
  else if (rd_kafka_flush(rk, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR)
    die("warm-up", "not delivered within 30 s");
  job->rtt_p99_us = 0; /* the warm-up's round trips are not counted */
  pthread_barrier_wait(job->start);
  double txn_started = now_seconds();
  if (job->txn_ms)
    check(rd_kafka_begin_transaction(rk), "begin_transaction");
  double paced_from = now_seconds();
  for (long i = 0; i < job->records; i++) {
    if (job->rate > 0) {
      double due = paced_from + (double)i / (double)job->rate;
      double wait = due - now_seconds();
      if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
      }
    }
    produce_one(rk, job, i + 1);
    rd_kafka_poll(rk, 0);
    if (job->txn_ms && now_seconds() - txn_started >= job->txn_ms / 1e3) {
      check(rd_kafka_commit_transaction(rk, 30000), "commit_transaction");
      check(rd_kafka_begin_transaction(rk), "begin_transaction");
      txn_started = now_seconds();
    }
  }
  if (job->txn_ms)
    check(rd_kafka_commit_transaction(rk, 30000), "commit_transaction");
  while (rd_kafka_outq_len(rk) > 0)
    rd_kafka_poll(rk, 10);
  rd_kafka_destroy(rk);
  return NULL;
}

static int produce(int argc, char **argv) {
  if (argc < 8)
    die("usage", "produce BROKERS TOPIC RECORDS RECORD_BYTES ACKS PRODUCERS "
                 "[idempotent] [txn_ms=MS] [keys=N] [rate=N]");
  long records = atol(argv[4]);
  long record_bytes = atol(argv[5]);
  long producers = atol(argv[7]);
  int idempotent = 0;
  long txn_ms = 0, keys = 0, rate = 0;
  for (int i = 8; i < argc; i++) {
    if (strcmp(argv[i], "idempotent") == 0)
      idempotent = 1;
    else if (strncmp(argv[i], "txn_ms=", 7) == 0 && atol(argv[i] + 7) > 0)
      txn_ms = atol(argv[i] + 7);
    else if (strncmp(argv[i], "keys=", 5) == 0 && atol(argv[i] + 5) > 0)
      keys = atol(argv[i] + 5);
    else if (strncmp(argv[i], "rate=", 5) == 0 && atol(argv[i] + 5) > 0)
      rate = atol(argv[i] + 5);
    else
      die("unknown option", argv[i]);
  }
  if (records < 1 || record_bytes < 1 || record_bytes > RECORD_BYTES_MAX ||
      producers < 1 || producers > PRODUCERS_MAX)
    die("usage", "RECORDS, RECORD_BYTES or PRODUCERS out of range");
  /* Incompressible, so no layer can shortcut the bytes. */
  char *payload = malloc((size_t)record_bytes);
  if (!payload)
    die("malloc", "payload");
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (long i = 0; i < record_bytes; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    payload[i] = (char)x;
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)producers + 1);
  struct producer_job jobs[PRODUCERS_MAX];
  pthread_t threads[PRODUCERS_MAX];
  for (long p = 0; p < producers; p++) {
    jobs[p] = (struct producer_job){.brokers = argv[2],
                                    .topic = argv[3],
                                    .acks = argv[6],
                                    .records = records,
                                    .payload = payload,
                                    .record_bytes = (size_t)record_bytes,
                                    .start = &start,
                                    .idempotent = idempotent,
                                    .txn_ms = txn_ms,
                                    .keys = keys,
                                    .rate = rate,
                                    .index = (int)p};
    if (pthread_create(&threads[p], NULL, run_producer, &jobs[p]) != 0)
      die("pthread_create", "producer");
  }
  pthread_barrier_wait(&start);
  double started = now_seconds();
  long failed = 0, rtt_p99_us = 0;
  for (long p = 0; p < producers; p++) {
    pthread_join(threads[p], NULL);
    failed += jobs[p].failed;
    if (jobs[p].rtt_p99_us > rtt_p99_us)
      rtt_p99_us = jobs[p].rtt_p99_us;
  }
  double seconds = now_seconds() - started;
  printf("records=%ld bytes=%ld seconds=%.6f rtt_p99_us=%ld\n",
         records * producers, records * producers * record_bytes, seconds,
         rtt_p99_us);
  free(payload);
  return failed ? 1 : 0;
}

static int consume(int argc, char **argv) {
  if (argc != 4 && !(argc == 5 && strcmp(argv[4], "read_committed") == 0))
    die("usage", "consume BROKERS TOPIC [read_committed]");
  char error[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", argv[2]);
  set(conf, "isolation.level", argc == 5 ? "read_committed" : "read_uncommitted");
  /* The end is known by EOF: a transaction's last marker takes an offset
     but is never delivered. */
  set(conf, "enable.partition.eof", "true");
  /* Data is always there until the end; there, answer at once. */
  set(conf, "fetch.wait.max.ms", "10");
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  if (!rk)
    die("creating a consumer", error);
  int64_t low, high;
  rd_kafka_resp_err_t err =
      rd_kafka_query_watermark_offsets(rk, argv[3], 0, &low, &high, 30000);
  if (err)
    die("watermarks", rd_kafka_err2str(err));
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, argv[3], NULL);
  double started = now_seconds();
  if (rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING) == -1)
    die("consume_start", rd_kafka_err2str(rd_kafka_last_error()));
  long records = 0, bytes = 0;
  int64_t next = low;
  rd_kafka_message_t *batch[1024];
  while (next < high) {
    /* Never ask for more than remains: the call waits until it has as
       many messages as asked for, or the timeout. */
    int64_t remaining = high - next;
    size_t want = remaining < 1024 ? (size_t)remaining : 1024;
    /* Near the end markers may take offsets no message comes for: wait
       briefly there, and let EOF say the end was reached. */
    int timeout_ms = remaining < 1024 ? 10 : 1000;
    ssize_t n = rd_kafka_consume_batch(rkt, 0, timeout_ms, batch, want);
    if (n < 0)
      die("consume", rd_kafka_err2str(rd_kafka_last_error()));
    for (ssize_t i = 0; i < n; i++) {
      rd_kafka_message_t *m = batch[i];
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        records++;
        bytes += (long)m->len;
        next = m->offset + 1;
      } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (m->offset >= high)
          next = high;
      } else {
        die("consume", rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);
    }
  }
  double seconds = now_seconds() - started;
  rd_kafka_consume_stop(rkt, 0);
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
  printf("records=%ld bytes=%ld seconds=%.6f\n", records, bytes, seconds);
  return 0;
}

static int alter(int argc, char **argv) {
  if (argc < 5)
    die("usage", "alter BROKERS TOPIC KEY=VALUE...");
  char error[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", argv[2]);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (!rk)
    die("creating a client", error);
  rd_kafka_ConfigResource_t *topic =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, argv[3]);
  for (int i = 4; i < argc; i++) {
    char *entry = strdup(argv[i]);
    if (!entry)
      die("strdup", argv[i]);
    char *eq = strchr(entry, '=');
    if (!eq)
      die("not KEY=VALUE", argv[i]);
    *eq = '\0';
    if (rd_kafka_ConfigResource_set_config(topic, entry, eq + 1))
      die("config entry", argv[i]);
    free(entry);
  }
  rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
  rd_kafka_AlterConfigs(rk, &topic, 1, NULL, queue);
  rd_kafka_event_t *event = rd_kafka_queue_poll(queue, 30000);
  if (!event)
    die("alter", "no answer within 30 s");
  if (rd_kafka_event_error(event))
    die("alter", rd_kafka_event_error_string(event));
  const rd_kafka_AlterConfigs_result_t *result =
      rd_kafka_event_AlterConfigs_result(event);
  size_t count;
  const rd_kafka_ConfigResource_t **resources =
      rd_kafka_AlterConfigs_result_resources(result, &count);
  for (size_t i = 0; i < count; i++)
    if (rd_kafka_ConfigResource_error(resources[i]))
      die("alter", rd_kafka_ConfigResource_error_string(resources[i]));
  rd_kafka_event_destroy(event);
  rd_kafka_ConfigResource_destroy(topic);
  rd_kafka_queue_destroy(queue);
  rd_kafka_destroy(rk);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "produce") == 0)
    return produce(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "consume") == 0)
    return consume(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "alter") == 0)
    return alter(argc, argv);
  die("usage", "produce ... | consume ... | alter ... (see the source)");
  return 2;
}

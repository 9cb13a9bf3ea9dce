/*
 * Load driver for the broker benchmark (benches/broker.rs), on librdkafka.
 *
 * kcat -P parses stdin line by line; this driver hands librdkafka records
 * straight from memory, so the client costs only what librdkafka itself
 * costs. The harness runs both and reports which one limits a case.
 *
 *   rdkafka_driver produce BROKERS TOPIC RECORDS RECORD_BYTES ACKS PRODUCERS
 *       PRODUCERS threads, each with its own producer (own connection),
 *       each sending RECORDS records of RECORD_BYTES to partition 0.
 *   rdkafka_driver consume BROKERS TOPIC
 *       reads partition 0 from the log start to the high watermark seen
 *       at start (the legacy consumer, as kcat -C uses, no group).
 *
 * Prints one line: "records=N bytes=N seconds=F". Only the payload bytes
 * (record values) are counted. Timing starts once every producer has
 * connected and delivered one warm-up record, and ends when the last
 * producer has had every record acknowledged. Exit status 1 on any
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
  long failed; /* delivery reports with an error */
};

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

static void produce_one(rd_kafka_t *rk, struct producer_job *job) {
  for (;;) {
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(job->topic), RD_KAFKA_V_PARTITION(0),
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
  set(conf, "enable.idempotence", "false");
  /* Enough room that the queue limit is not what paces the producer. */
  set(conf, "queue.buffering.max.messages", "1000000");
  set(conf, "queue.buffering.max.kbytes", "1048576");
  rd_kafka_conf_set_opaque(conf, job);
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (!rk)
    die("creating a producer", error);
  /* Warm-up: connection, metadata, topic creation. */
  produce_one(rk, job);
  if (rd_kafka_flush(rk, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR)
    die("warm-up", "not delivered within 30 s");
  pthread_barrier_wait(job->start);
  for (long i = 0; i < job->records; i++) {
    produce_one(rk, job);
    rd_kafka_poll(rk, 0);
  }
  while (rd_kafka_outq_len(rk) > 0)
    rd_kafka_poll(rk, 10);
  rd_kafka_destroy(rk);
  return NULL;
}

static int produce(int argc, char **argv) {
  if (argc != 8)
    die("usage", "produce BROKERS TOPIC RECORDS RECORD_BYTES ACKS PRODUCERS");
  long records = atol(argv[4]);
  long record_bytes = atol(argv[5]);
  long producers = atol(argv[7]);
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
    jobs[p] = (struct producer_job){argv[2], argv[3], argv[6], records,
                                    payload, (size_t)record_bytes, &start, 0};
    if (pthread_create(&threads[p], NULL, run_producer, &jobs[p]) != 0)
      die("pthread_create", "producer");
  }
  pthread_barrier_wait(&start);
  double started = now_seconds();
  long failed = 0;
  for (long p = 0; p < producers; p++) {
    pthread_join(threads[p], NULL);
    failed += jobs[p].failed;
  }
  double seconds = now_seconds() - started;
  printf("records=%ld bytes=%ld seconds=%.6f\n", records * producers,
         records * producers * record_bytes, seconds);
  free(payload);
  return failed ? 1 : 0;
}

static int consume(int argc, char **argv) {
  if (argc != 4)
    die("usage", "consume BROKERS TOPIC");
  char error[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", argv[2]);
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
    ssize_t n = rd_kafka_consume_batch(rkt, 0, 1000, batch, want);
    if (n < 0)
      die("consume", rd_kafka_err2str(rd_kafka_last_error()));
    for (ssize_t i = 0; i < n; i++) {
      rd_kafka_message_t *m = batch[i];
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        records++;
        bytes += (long)m->len;
        next = m->offset + 1;
      } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
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

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "produce") == 0)
    return produce(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "consume") == 0)
    return consume(argc, argv);
  die("usage", "produce ... | consume ... (see the source)");
  return 2;
}

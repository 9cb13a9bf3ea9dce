// kafkajs driver for the compatibility suite.
//
// Reads one JSON request on stdin, runs it with kafkajs and prints one JSON
// result on stdout; bytes travel as hex. Any failure exits non-zero with the
// error on stderr. Ops and their shapes are described in
// tests/compat/driver.rs. kafkajs builds in gzip only; snappy comes from the
// kafkajs-snappy codec package, and there is no lz4 or zstd here (their
// codec packages need native builds).
//
// kafkajs has no manual partition assignment: its consumer always joins a
// group, so every consuming op needs the broker's group coordinator.

'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec

const WAIT_MS = 60000
const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
}
const ACKS = { 0: 0, 1: 1, all: -1 }

const unhex = text => (text === null ? null : Buffer.from(text, 'hex'))
const tohex = data => (data === null || data === undefined ? null : Buffer.from(data).toString('hex'))

function client(request) {
  return new Kafka({
    clientId: 'strata-compat',
    brokers: [request.bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  })
}

// kafkajs keeps headers in an object; a name given several times maps to an
// array of values, in order.
function headersIn(pairs) {
  const headers = {}
  for (const [name, value] of pairs) {
    const bytes = unhex(value)
    if (name in headers) {
      headers[name] = [].concat(headers[name], [bytes])
    } else {
      headers[name] = bytes
    }
  }
  return headers
}

function headersOut(headers) {
  const pairs = []
  for (const [name, value] of Object.entries(headers || {})) {
    for (const v of Array.isArray(value) ? value : [value]) {
      pairs.push([name, tohex(v)])
    }
  }
  return pairs
}

function asRecord(partition, message) {
  return {
    partition,
    offset: Number(message.offset),
    timestamp: Number(message.timestamp),
    key: tohex(message.key),
    value: tohex(message.value),
    headers: headersOut(message.headers),
  }
}

const byPosition = (a, b) => a.partition - b.partition || a.offset - b.offset

// A consumer that crashes (kafkajs stops it) fails the op at once.
const crashes = []

function watch(consumer) {
  consumer.on(consumer.events.CRASH, e => crashes.push(e.payload.error))
  return consumer
}

async function until(what, done) {
  const end = Date.now() + WAIT_MS
  while (!(await done())) {
    if (crashes.length > 0) throw crashes[0]
    if (Date.now() > end) throw new Error(`gave up after ${WAIT_MS} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

async function withAdmin(request, body) {
  const admin = client(request).admin()
  await admin.connect()
  try {
    return await body(admin)
  } finally {
    await admin.disconnect()
  }
}

async function createTopics(request) {
  return withAdmin(request, async admin => {
    const errors = {}
    // One at a time: kafkajs reports an existing topic only as `false`.
    for (const t of request.topics) {
      const created = await admin.createTopics({
        topics: [
          {
            topic: t.name,
            numPartitions: t.partitions,
            replicationFactor: 1,
            configEntries: Object.entries(t.configs).map(([name, value]) => ({ name, value })),
          },
        ],
      })
      errors[t.name] = created ? null : 'TOPIC_ALREADY_EXISTS'
    }
    return { errors }
  })
}

async function listTopics(request) {
  return withAdmin(request, async admin => {
    const names = await admin.listTopics()
    const { topics } = await admin.fetchTopicMetadata({ topics: names })
    return { topics: Object.fromEntries(topics.map(t => [t.name, t.partitions.length])) }
  })
}

async function producer(request) {
  const p = client(request).producer({
    idempotent: request.idempotence,
    maxInFlightRequests: request.idempotence ? 1 : undefined,
    allowAutoTopicCreation: false,
  })
  await p.connect()
  return p
}

async function produce(request) {
  if (!(request.compression in COMPRESSION)) {
    throw new Error(`kafkajs has no ${request.compression} codec here`)
  }
  const p = await producer(request)
  const messages = request.records.map(spec => ({
    partition: spec.partition,
    key: unhex(spec.key),
    value: unhex(spec.value),
    headers: headersIn(spec.headers),
    timestamp: spec.timestamp === null ? undefined : String(spec.timestamp),
  }))
  const acks = ACKS[request.acks]
  const results = await p.send({
    topic: request.topic,
    acks,
    compression: COMPRESSION[request.compression],
    messages,
  })
  await p.disconnect()
  if (acks === 0) return { offsets: request.records.map(() => null) }
  // One result per partition, with the base offset of its messages in the
  // order they were given.
  const next = Object.fromEntries(results.map(r => [r.partition, Number(r.baseOffset)]))
  return { offsets: request.records.map(spec => next[spec.partition]++) }
}

// Runs `count` records through a fresh group's consumer.
async function consume(request) {
  if (request.offset !== 'beginning') {
    throw new Error('the kafkajs driver consumes from the beginning only')
  }
  const consumer = watch(client(request).consumer({ groupId: `compat-${process.pid}-${Date.now()}` }))
  await consumer.connect()
  await consumer.subscribe({ topics: [request.topic], fromBeginning: true })
  const records = []
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (request.partitions.includes(partition)) records.push(asRecord(partition, message))
    },
  })
  await until(`${request.count} records (${records.length} so far)`, () => records.length >= request.count)
  await consumer.disconnect()
  return { records: records.slice(0, request.count).sort(byPosition) }
}

// kafkajs answers "no record at or after this time" (-1 from the broker)
// with the partition's end offset, where no record is: map it back to null.
async function offsetsForTimes(request) {
  return withAdmin(request, async admin => {
    const offsets = []
    for (const ts of request.timestamps) {
      const found = await admin.fetchTopicOffsetsByTimestamp(request.topic, ts)
      const offset = Number(found.find(o => o.partition === request.partition).offset)
      const ends = await admin.fetchTopicOffsets(request.topic)
      const high = Number(ends.find(o => o.partition === request.partition).high)
      offsets.push(offset >= 0 && offset !== high ? offset : null)
    }
    return { offsets }
  })
}

// kafkajs seeks a running group consumer to an offset. Its special offsets
// (-2 beginning, -1 end) go through a commit: with autoCommit off it reads
// them as "no offset" and fetches from 0. So the beginning and the end are
// the low and high offsets its admin client reports.
async function seek(request) {
  const { topic, partition } = request
  const { low, high } = await withAdmin(request, async admin => {
    const o = (await admin.fetchTopicOffsets(topic)).find(o => o.partition === partition)
    return { low: Number(o.low), high: Number(o.high) }
  })
  const consumer = watch(
    client(request).consumer({
      groupId: `compat-${process.pid}-${Date.now()}`,
      maxWaitTimeInMs: 100,
    })
  )
  await consumer.connect()
  // No committed offset and not from the beginning: it starts at the end.
  await consumer.subscribe({ topics: [topic], fromBeginning: false })
  const delivered = []
  let joined = false
  let pauseAfterNext = false
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joined = true
  })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition: p, message }) => {
      if (p !== partition) return
      delivered.push(Number(message.offset))
      // Stops the rest of the batch too.
      if (pauseAfterNext) consumer.pause([{ topic, partitions: [partition] }])
    },
  })
  await until('the consumer to join its group', () => joined)
  const next = async what => {
    const seen = delivered.length
    await until(what, () => delivered.length > seen)
    return delivered[seen]
  }
  consumer.seek({ topic, partition, offset: String(high - 1) })
  const last = await next('the last record')
  pauseAfterNext = true
  consumer.seek({ topic, partition, offset: String(low) })
  const afterBeginning = await next('the first record after seek to beginning')
  pauseAfterNext = false
  consumer.seek({ topic, partition, offset: String(high) })
  consumer.resume([{ topic, partitions: [partition] }])
  const p = await producer({ bootstrap: request.bootstrap, idempotence: false })
  await p.send({
    topic,
    acks: -1,
    messages: [{ partition, key: unhex(request.append.key), value: unhex(request.append.value) }],
  })
  await p.disconnect()
  const afterEnd = await next('the record appended after seek to end')
  await consumer.disconnect()
  return { low, high, last, after_beginning: afterBeginning, after_end: afterEnd }
}

// kafkajs cannot seek before its first fetch, so the expired offset is the
// group's committed one; the reset policy is `fromBeginning` (true:
// earliest). The reset to the latest offset shows no position, so only
// `earliest` is checked.
async function outOfRange(request) {
  if (request.reset !== 'earliest') throw new Error(`kafkajs has no ${request.reset} check`)
  const { topic, partition } = request
  const groupId = `compat-${process.pid}-${Date.now()}`
  await withAdmin(request, admin =>
    admin.setOffsets({ groupId, topic, partitions: [{ partition, offset: String(request.offset) }] })
  )
  const consumer = watch(client(request).consumer({ groupId, maxWaitTimeInMs: 100 }))
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const records = []
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition: p, message }) => {
      if (p === partition) records.push(asRecord(p, message))
    },
  })
  await until(`${request.count} records after the reset`, () => records.length >= request.count)
  await consumer.disconnect()
  return { records: records.slice(0, request.count) }
}

async function group(request) {
  const { topic, ends } = request
  const members = [0, 1].map(() => ({
    consumer: watch(
      client(request).consumer({
        groupId: request.group,
        sessionTimeout: 10000,
        heartbeatInterval: 500,
      })
    ),
    assigned: [],
    position: {},
    records: [],
  }))
  for (const m of members) {
    m.consumer.on(m.consumer.events.GROUP_JOIN, e => {
      m.assigned = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    })
    await m.consumer.connect()
    await m.consumer.subscribe({ topics: [topic], fromBeginning: true })
    await m.consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        m.records.push(asRecord(partition, message))
        m.position[partition] = Number(message.offset) + 1
      },
    })
  }
  const caughtUp = () =>
    members.every(m => m.assigned.length > 0 && m.assigned.every(p => m.position[p] === ends[p]))
  await until('both members to read their partitions to the end', caughtUp)
  const result = []
  for (const m of members) {
    await m.consumer.commitOffsets(m.assigned.map(p => ({ topic, partition: p, offset: String(ends[p]) })))
    result.push({ assigned: m.assigned, records: m.records.sort(byPosition) })
  }
  for (const m of members) await m.consumer.disconnect()
  return { members: result }
}

async function committed(request) {
  return withAdmin(request, async admin => {
    const [entry] = await admin.fetchOffsets({ groupId: request.group, topics: [request.topic] })
    const offsets = {}
    for (let p = 0; p < request.partitions; p++) offsets[String(p)] = -1
    for (const o of entry.partitions) offsets[String(o.partition)] = Number(o.offset)
    return { offsets }
  })
}

// Two producers with one transactional id: the first (the zombie) sends
// `zombie_values` in a transaction it leaves open; the second connects
// (which fences the first and aborts its transaction), sends `values` and
// the group offset `offset` in its transaction and commits; then the
// zombie tries to commit. Returns the zombie's error, what a
// read_committed consumer reads and the group's committed offset.
async function txnZombie(request) {
  const kafka = client(request)
  const { topic, partition } = request
  const options = { transactionalId: request.transactional_id, maxInFlightRequests: 1, idempotent: true }
  const messages = values => values.map(value => ({ value, partition }))
  const zombie = kafka.producer(options)
  await zombie.connect()
  const stale = await zombie.transaction()
  await stale.send({ topic, messages: messages(request.zombie_values) })
  const successor = kafka.producer(options)
  await successor.connect()
  const fresh = await successor.transaction()
  await fresh.send({ topic, messages: messages(request.values) })
  await fresh.sendOffsets({
    consumerGroupId: request.group,
    topics: [{ topic, partitions: [{ partition, offset: String(request.offset) }] }],
  })
  await fresh.commit()
  let zombieError = null
  try {
    await stale.commit()
  } catch (e) {
    zombieError = e.type || e.name || String(e)
  }
  await successor.disconnect()
  await zombie.disconnect().catch(() => {})

  const consumer = watch(kafka.consumer({ groupId: `compat-${process.pid}-${Date.now()}`, readUncommitted: false }))
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const values = []
  await consumer.run({ autoCommit: false, eachMessage: async ({ message }) => values.push(message.value.toString()) })
  await until(`${request.values.length} committed values (${values.length} so far)`, () => values.length >= request.values.length)
  // Anything more (an aborted value) would arrive with or right after them.
  await new Promise(resolve => setTimeout(resolve, 1000))
  await consumer.disconnect()
  const committedOffsets = await withAdmin(request, admin => admin.fetchOffsets({ groupId: request.group, topics: [topic] }))
  const offset = committedOffsets[0].partitions.find(p => p.partition === partition).offset
  return { zombie_error: zombieError, values, committed: Number(offset) }
}

const OPS = {
  txn_zombie: txnZombie,
  create_topics: createTopics,
  list_topics: listTopics,
  produce,
  consume,
  offsets_for_times: offsetsForTimes,
  seek,
  out_of_range: outOfRange,
  group,
  committed,
}

async function main() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const request = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  const op = OPS[request.op]
  if (!op) throw new Error(`unknown op ${request.op}; this driver knows ${Object.keys(OPS)}`)
  return op(request)
}

main().then(
  // Exit once the result is written: a pipe takes it asynchronously.
  result => process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0)),
  error => {
    console.error(error && error.stack ? error.stack : error)
    process.exit(1)
  }
)

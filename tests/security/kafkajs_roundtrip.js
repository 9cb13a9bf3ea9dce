// Produce `count` records to `topic` with kafkajs under the given
// Kafka-style client settings, then read them back in a group; prints one
// JSON line: {"produced": n, "consumed": n} or {"error": "<what the client
// said>", "error_name": "<the client's name for it>"}.
//
// Reads {"bootstrap", "config", "topic", "count"} as JSON on stdin; `config`
// holds `security.protocol`, `ssl.ca.location`, `sasl.mechanism`,
// `sasl.username` and `sasl.password`, mapped here to kafkajs's options.
// An optional "mode" does one half: "produce" ({"produced": n}) or
// "consume" (up to `count` records as a member of "group", default
// "security-check": {"consumed": n}). kafkajs is found through NODE_PATH.

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

// The whole run, refused or not, ends within this.
const WAIT_MS = 25000
const GROUP = 'security-check'

function answer (value) {
  process.stdout.write(JSON.stringify(value) + '\n', () => process.exit(0))
}

function clientOptions (request) {
  const config = request.config
  const protocol = config['security.protocol'] || 'PLAINTEXT'
  const options = {
    clientId: 'security-check',
    brokers: [request.bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5000,
    authenticationTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 2 }
  }
  if (protocol === 'SSL' || protocol === 'SASL_SSL') {
    options.ssl = config['ssl.ca.location']
      ? { ca: [fs.readFileSync(config['ssl.ca.location'])] }
      : true
  }
  if (protocol === 'SASL_PLAINTEXT' || protocol === 'SASL_SSL') {
    options.sasl = {
      mechanism: config['sasl.mechanism'].toLowerCase(),
      username: config['sasl.username'],
      password: config['sasl.password']
    }
  }
  return options
}

async function produce (kafka, request) {
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const messages = []
  for (let i = 0; i < request.count; i++) {
    messages.push({ key: String(i), value: 'v'.repeat(1000) })
  }
  try {
    // Resolves once every record is acknowledged.
    await producer.send({ topic: request.topic, messages })
  } finally {
    await producer.disconnect()
  }
  return { produced: messages.length }
}

async function consume (kafka, request) {
  const consumer = kafka.consumer({ groupId: request.group || GROUP })
  await consumer.connect()
  let consumed = 0
  try {
    await consumer.subscribe({ topics: [request.topic], fromBeginning: true })
    await new Promise((resolve, reject) => {
      consumer.run({
        eachMessage: async () => {
          consumed += 1
          if (consumed >= request.count) resolve()
        }
      }).catch(reject)
      consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error))
    })
  } finally {
    await consumer.disconnect()
  }
  return { consumed }
}

async function run (request) {
  const kafka = new Kafka(clientOptions(request))
  const mode = request.mode || 'round-trip'
  if (mode === 'consume') return consume(kafka, request)
  const produced = await produce(kafka, request)
  if (mode === 'produce') return produced
  return { ...produced, ...await consume(kafka, request) }
}

// kafkajs names a broker's error by its `type` (TOPIC_AUTHORIZATION_FAILED),
// on the error or on the one it wraps.
function errorName (e) {
  for (let at = e; at; at = at.originalError || at.cause) {
    if (at.type) return at.type
  }
  return e.name
}

function describe (e) {
  const parts = [`${e.name}: ${e.message}`]
  for (let cause = e.originalError || e.cause; cause; cause = cause.originalError || cause.cause) {
    parts.push(`${cause.name}: ${cause.message}`)
  }
  return parts.join('; ')
}

let input = ''
process.stdin.on('data', (chunk) => { input += chunk })
process.stdin.on('end', () => {
  const request = JSON.parse(input)
  setTimeout(() => answer({ error: 'timed out' }), WAIT_MS)
  run(request).then(answer, (e) => answer({ error: describe(e), error_name: errorName(e) }))
})

//! Producers that do no client work beyond the wire's: a plain program
//! against which strata's producer client is set.
//!
//! - [`Encoding::Once`], the broker's intake: one produce request built
//!   before the run (a batch of as many records of the case's size as fit
//!   in [`BATCH_BYTES`], the batch size strata's client fills under load),
//!   sent again and again. Nothing is encoded or copied per record: the
//!   broker's own limit. A producer near it (the plain one below, at
//!   times) is held by the broker, not by its own work.
//! - [`Encoding::PerRequest`], the plain producer: each request's batch
//!   encoded anew from its records (each value copied in, the batch's CRC
//!   computed, the request framed), on one thread, between its sends:
//!   the work per record that any Kafka producer does, without a
//!   client's queues, partitioner or per-record delivery results. It is
//!   the floor of the producer-client target, and a low one: the request
//!   goes through the general encoder, which copies the batch into it
//!   (the client frames a produce request around its batch by hand), so
//!   a producer can do a little better than this one.
//!
//! Both keep [`IN_FLIGHT`] requests outstanding over one connection and
//! check each answer. They run as this benchmark's binary started again
//! with [`ARG`] and the case's figures, and print what they did as the C
//! driver does (`records=N bytes=N seconds=F`), so the harness times them
//! as it times the driver.

use std::io::Write;
use std::net::TcpStream;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, MetadataRequest, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::Decodable;
use strata::record::{BatchBuilder, Compression, NewRecord};

use super::serve;

/// The first argument that makes the binary one of these producers.
pub const ARG: &str = "--prebuilt-produce";
/// Record bytes per request: strata's client's `batch_bytes` default.
const BATCH_BYTES: usize = 1 << 20;
/// Requests outstanding: strata's client's `max_in_flight` default.
const IN_FLIGHT: usize = 5;
/// Most bytes a record adds to a batch beside its value (its length,
/// attributes, deltas and header count, varints at their longest).
const RECORD_OVERHEAD_MAX: usize = 32;
const PRODUCE_VERSION: i16 = 9;
const METADATA_VERSION: i16 = 9;

/// How often a producer encodes its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Once,
    PerRequest,
}

impl Encoding {
    pub fn arg(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::PerRequest => "per-request",
        }
    }
}

/// The command line after [`ARG`]: encoding, address, topic, records,
/// record bytes, acks.
pub fn run(args: &[String]) -> Result<()> {
    let [encoding, address, topic, records, record_bytes, acks] = args else {
        anyhow::bail!("{ARG} once|per-request ADDRESS TOPIC RECORDS RECORD_BYTES ACKS");
    };
    let encoding = [Encoding::Once, Encoding::PerRequest]
        .into_iter()
        .find(|e| e.arg() == encoding)
        .with_context(|| format!("{encoding} is not once or per-request"))?;
    let records: u64 = records.parse().context("RECORDS")?;
    let record_bytes: usize = record_bytes.parse().context("RECORD_BYTES")?;
    let acks: i16 = acks.parse().context("ACKS")?;
    let mut stream =
        TcpStream::connect(address.as_str()).with_context(|| format!("connecting to {address}"))?;
    stream.set_nodelay(true)?;
    create_topic(&mut stream, topic)?;

    let noise = super::baselines::pseudo_random(record_bytes + 4096);
    let (mut request_body, per_batch) = request(topic, &noise, record_bytes, acks)?;
    let batches = records.div_ceil(per_batch).max(1);
    let started = Instant::now();
    let (mut sent, mut answered) = (0u64, 0u64);
    while answered < batches {
        while sent < batches && sent - answered < IN_FLIGHT as u64 {
            if encoding == Encoding::PerRequest && sent > 0 {
                request_body = request(topic, &noise, record_bytes, acks)?.0;
            }
            let correlation_id = i32::try_from(sent % i32::MAX as u64)?;
            // The head with this send's correlation id, then the rest as
            // built: nothing of the batch is copied per send.
            stream.write_all(&head(&request_body, correlation_id))?;
            stream.write_all(&request_body[HEAD_BYTES..])?;
            sent += 1;
        }
        let answer = serve::read_frame(&mut stream)?;
        check(answer)?;
        answered += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let sent_records = batches * per_batch;
    println!(
        "records={sent_records} bytes={} seconds={seconds}",
        sent_records * record_bytes as u64
    );
    Ok(())
}

/// Asks for the topic's metadata, which creates it (the broker creates
/// topics on first use, as the other clients find it).
fn create_topic(stream: &mut TcpStream, topic: &str) -> Result<()> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(serve::topic_name(topic))),
        ]))
        .with_allow_auto_topic_creation(true);
    stream.write_all(&serve::frame(
        ApiKey::Metadata,
        METADATA_VERSION,
        -1,
        &request,
    )?)?;
    serve::read_frame(stream)?;
    Ok(())
}

/// The produce request's header and body (its correlation id put in per
/// send), and the records its batch holds.
fn request(topic: &str, noise: &[u8], record_bytes: usize, acks: i16) -> Result<(Vec<u8>, u64)> {
    // Sized once, as the client sizes a partition's next batch.
    let mut batch = BatchBuilder::with_capacity(Compression::None, BATCH_BYTES);
    let now = strata::log::now_ms();
    // Whole records up to the batch size (its header included), as the
    // client's batches are (and within the broker's default
    // `max.message.bytes`).
    while batch.uncompressed_size_bytes() + record_bytes + RECORD_OVERHEAD_MAX <= BATCH_BYTES {
        let at = (batch.len() * 61) % 4096;
        batch.push(NewRecord::new(None, &noise[at..at + record_bytes], now))?;
    }
    let per_batch = batch.len();
    let body = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(serve::topic_name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(batch.into_batch()?))),
                ]),
        ]);
    let frame = serve::frame(ApiKey::Produce, PRODUCE_VERSION, 0, &body)?;
    Ok((frame, per_batch as u64))
}

/// A request frame's size, api key, version and correlation id.
const HEAD_BYTES: usize = 12;

/// The first [`HEAD_BYTES`] of `frame` (as [`serve::frame`] built it, with
/// correlation id 0), `correlation_id` put in.
fn head(frame: &[u8], correlation_id: i32) -> [u8; HEAD_BYTES] {
    let mut head = [0u8; HEAD_BYTES];
    head.copy_from_slice(&frame[..HEAD_BYTES]);
    head[8..].copy_from_slice(&correlation_id.to_be_bytes());
    head
}

/// Fails on an answer whose partition reports an error.
fn check(answer: Bytes) -> Result<()> {
    let mut body = answer;
    // The response header of a flexible Produce (v9+): correlation id and
    // tagged fields.
    let header = kafka_protocol::messages::ResponseHeader::decode(
        &mut body,
        ApiKey::Produce.response_header_version(PRODUCE_VERSION),
    )?;
    ensure!(header.correlation_id >= 0, "a produce answer without an id");
    let response = ProduceResponse::decode(&mut body, PRODUCE_VERSION)?;
    for topic in &response.responses {
        for partition in &topic.partition_responses {
            ensure!(
                partition.error_code == 0,
                "the broker answered a produce with error {}",
                partition.error_code
            );
        }
    }
    Ok(())
}

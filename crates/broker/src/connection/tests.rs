//! A connection driven by hand, one poll of its task at a time.

use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;

use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncRead, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::sync::watch;

use super::test_context::{context, step};
use super::{Link, PRE_AUTH_MEMORY_BYTES_MAX, RequestMemory, run};
use crate::api::tests::numbered_request;
use crate::auth::{Caller, Principal};
use crate::listener::{Endpoint, SecurityProtocol};
use crate::transport::TlsWriter;

/// An ApiVersions v0 request (no client id) carrying `correlation`, its
/// size first.
fn api_versions(correlation: i32) -> Vec<u8> {
    let body = numbered_request(ApiKey::ApiVersions as i16, 0, correlation, None);
    let mut frame = i32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// The bytes `client` can read without waiting.
async fn readable_now(client: &mut DuplexStream) -> Vec<u8> {
    let mut bytes = vec![0u8; 64 << 10];
    let mut buf = ReadBuf::new(&mut bytes);
    let read =
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *client).poll_read(cx, &mut buf)))
            .await;
    let filled = match read {
        Poll::Ready(read) => {
            read.unwrap();
            buf.filled().len()
        }
        Poll::Pending => 0,
    };
    bytes.truncate(filled);
    bytes
}

/// The reader, the handler and the writer are polled in the order a
/// request goes through them: a request whose handler runs inline is
/// read, handled and answered within one poll of the connection's task,
/// every time (polled in a random order, two times in three it was not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_request_is_read_handled_and_answered_in_one_poll_of_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir);
    let memory = RequestMemory::new(
        ctx.config.request_memory_bytes_max,
        PRE_AUTH_MEMORY_BYTES_MAX,
    );
    let endpoint = Endpoint {
        name: "PLAINTEXT".to_string(),
        protocol: SecurityProtocol::Plaintext,
        host: "localhost".to_string(),
        port: 9092,
    };
    let link = Link {
        endpoint: Arc::new(endpoint),
        tls: None,
        secured: false,
        sasl: None,
    };
    let caller = Caller {
        principal: Principal::anonymous(),
        host: String::new(),
        secured: false,
    };
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let (reading, writing) = tokio::io::split(server);
    let (_stop, shutdown) = watch::channel(false);
    let writer = TlsWriter::new(writing);
    let connection = run(reading, writer, &link, caller, ctx, &memory, shutdown, None);
    let mut connection = pin!(connection);
    for correlation in 0..20 {
        client.write_all(&api_versions(correlation)).await.unwrap();
        // Each poll of a task starts with a fresh cooperative budget: this
        // test's own polls would otherwise spend one budget across them.
        tokio::task::yield_now().await;
        let polled = step(connection.as_mut()).await;
        assert!(polled.is_pending(), "the connection stays open");
        let answer = readable_now(&mut client).await;
        assert!(
            answer.len() >= 8,
            "request {correlation}: {} bytes answered after one poll",
            answer.len()
        );
        let size = i32::from_be_bytes(answer[..4].try_into().unwrap());
        assert_eq!(answer.len(), 4 + size as usize, "one whole answer");
        assert_eq!(answer[4..8], correlation.to_be_bytes(), "its answer");
    }
}

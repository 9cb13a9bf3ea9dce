//! Speaking the Kafka protocol to a broker by hand: framing a request,
//! reading the response, decoding it in the version asked for.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A size-prefixed request frame with client id "test".
pub fn frame<T: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &T) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string("test".into())));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// Sends `request` and reads one response frame (without its size);
/// `None` when the broker closed the connection.
pub async fn exchange(stream: &mut TcpStream, request: &[u8]) -> Option<Bytes> {
    stream.write_all(request).await.unwrap();
    read_response(stream).await
}

pub async fn read_response(stream: &mut TcpStream) -> Option<Bytes> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await.ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).await.ok()?;
    Some(Bytes::from(body))
}

/// Decodes a response frame, checking the correlation id and that nothing
/// is left over.
pub fn decode_response<Resp: Decodable>(
    mut response: Bytes,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Resp {
    let header =
        ResponseHeader::decode(&mut response, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, correlation_id);
    let decoded = Resp::decode(&mut response, version).unwrap();
    assert_eq!(response.remaining(), 0, "the whole response is consumed");
    decoded
}

/// One request, one decoded response.
pub async fn call<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    let correlation_id = 1000 + i32::from(version);
    let response = exchange(stream, &frame(key, version, correlation_id, request))
        .await
        .expect("a response");
    decode_response(response, key, version, correlation_id)
}

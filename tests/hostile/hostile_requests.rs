//! Requests that claim absurd lengths: the broker closes that connection and
//! keeps serving everyone else (the decoder would otherwise try to reserve
//! hundreds of gigabytes, and a failed allocation aborts a Rust process).

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use support::wire::call_blocking;

/// Size-prefixes a request body.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// Sends `request` and reads until the broker closes the connection.
fn closes_without_answer(addr: &str, request: &[u8]) -> bool {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request).unwrap();
    let mut rest = Vec::new();
    matches!(stream.read_to_end(&mut rest), Ok(0)) || rest.is_empty()
}

fn api_versions_answers(addr: &str) -> bool {
    let mut stream = TcpStream::connect(addr).unwrap();
    let answer: std::io::Result<ApiVersionsResponse> = call_blocking(
        &mut stream,
        ApiKey::ApiVersions,
        0,
        &ApiVersionsRequest::default(),
    );
    answer.is_ok_and(|response| response.error_code == 0)
}

#[test]
fn array_counts_of_billions_close_the_connection_not_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = support::ServerProcess::start(env!("CARGO_BIN_EXE_strata"), dir.path());
    let addr = server.addr.clone();

    // Metadata v1: header (key 3, version 1, correlation id, client id),
    // then a topics array claiming i32::MAX entries and no entries at all.
    let mut v1 = vec![0, 3, 0, 1, 0, 0, 0, 1, 0, 1, b't'];
    v1.extend_from_slice(&i32::MAX.to_be_bytes());
    // Metadata v9 (flexible): compact topics array claiming u32::MAX - 1.
    let mut v9 = vec![0, 3, 0, 9, 0, 0, 0, 2, 0, 1, b't', 0];
    v9.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    for request in [v1, v9] {
        assert!(closes_without_answer(&addr, &frame(&request)));
        assert!(server.is_running(), "the broker survived");
        assert!(api_versions_answers(&addr));
    }
}

/// A request header for `key` at `version` (in the header version that
/// API version takes), without the size prefix.
fn header(key: ApiKey, version: i16) -> Vec<u8> {
    use kafka_protocol::messages::RequestHeader;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let mut out = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("hostile")))
        .encode(&mut out, key.request_header_version(version))
        .unwrap();
    out.to_vec()
}

/// Every version of the transaction and admin APIs, with bodies that are
/// empty, claim billions of entries in their first array or string, or
/// are seeded garbage: the broker answers or closes that connection, and
/// keeps serving.
#[test]
fn malformed_transaction_and_admin_requests_never_take_the_broker_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = support::ServerProcess::start(env!("CARGO_BIN_EXE_strata"), dir.path());
    let addr = server.addr.clone();
    let mut rng = support::rng::Rng(0x7ea5_0000_0000_0016);
    let apis = [
        ApiKey::AddPartitionsToTxn,
        ApiKey::AddOffsetsToTxn,
        ApiKey::TxnOffsetCommit,
        ApiKey::EndTxn,
        ApiKey::DescribeTransactions,
        ApiKey::ListTransactions,
        ApiKey::DescribeProducers,
        ApiKey::DescribeCluster,
        ApiKey::DeleteRecords,
        ApiKey::AlterConfigs,
        ApiKey::IncrementalAlterConfigs,
        ApiKey::DescribeUserScramCredentials,
        ApiKey::AlterUserScramCredentials,
        ApiKey::DescribeAcls,
        ApiKey::CreateAcls,
        ApiKey::DeleteAcls,
    ];
    let mut sent = 0;
    for key in apis {
        let range = key.valid_versions();
        for version in range.min..=range.max {
            let mut bodies = vec![
                Vec::new(),
                i32::MAX.to_be_bytes().to_vec(),
                vec![0xff, 0xff, 0xff, 0xff, 0x0f],
                vec![0x7f, 0xff],
            ];
            for _ in 0..8 {
                let len = rng.below(64) as usize;
                bodies.push(rng.bytes(len));
            }
            for body in bodies {
                let mut request = header(key, version);
                request.extend_from_slice(&body);
                let mut stream = TcpStream::connect(&addr).unwrap();
                stream
                    .set_read_timeout(Some(std::time::Duration::from_secs(20)))
                    .unwrap();
                stream.write_all(&frame(&request)).unwrap();
                stream.shutdown(std::net::Shutdown::Write).unwrap();
                let mut rest = Vec::new();
                let _ = stream.read_to_end(&mut rest);
                sent += 1;
            }
            assert!(
                server.is_running(),
                "{key:?} v{version} took the broker down"
            );
        }
        assert!(api_versions_answers(&addr), "after {key:?}");
    }
    assert!(sent > 400, "{sent} requests");
}

//! Requests that claim absurd lengths: the broker closes that connection and
//! keeps serving everyone else (the decoder would otherwise try to reserve
//! hundreds of gigabytes, and a failed allocation aborts a Rust process).

mod support;

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

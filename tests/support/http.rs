//! One HTTP/1.1 request on a fresh connection, as curl or a scraper sends
//! it (`Connection: close`), the whole answer read: for the endpoints the
//! broker and apps serve (`/metrics`, the query endpoint).

use std::io::{Read, Write};

/// The status and body of `METHOD target` at `addr`.
pub fn request(addr: &str, method: &str, target: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr)
        .unwrap_or_else(|e| panic!("connecting to {addr} for {method} {target}: {e}"));
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("an answer without a head: {response:?}"));
    let status = (head.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("an answer without a status: {head:?}"));
    (status, body.to_string())
}

/// The status and body of `GET target` at `addr`.
pub fn get(addr: &str, target: &str) -> (u16, String) {
    request(addr, "GET", target)
}

/// The status and JSON body (null if it is not JSON) of `GET target`.
pub fn get_json(addr: &str, target: &str) -> (u16, serde_json::Value) {
    let (status, body) = get(addr, target);
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

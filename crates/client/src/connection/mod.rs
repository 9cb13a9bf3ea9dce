//! One connection to one broker: requests pipelined in order, responses
//! matched to them by position (Kafka answers a connection's requests in
//! the order sent) and checked by correlation id.
//!
//! On connect the client asks ApiVersions and from then on sends each API
//! in the newest version both sides speak, capped by what this client
//! implements ([`Connection::version`]). A broker that does not know the
//! ApiVersions version asked answers UNSUPPORTED_VERSION in the v0 layout
//! (KIP-511) and is asked again in a version it offers. A request with no response
//! (Produce with acks=0) is written and not waited for.
//!
//! Secured ([`super::authenticate::connect_secured`]): TLS is set up before the
//! first request, and SASL right after ApiVersions. A broker that sets a
//! session lifetime closes the connection when it ends; the connection
//! counts as broken (so the cluster opens a new one, logging in again)
//! once `SESSION_MARGIN` of it is left, rather than re-authenticating in
//! place.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, oneshot};

use super::ClientError;
use super::error::Broken;
use super::security::ClientSecurity;

mod api_versions;

use api_versions::{VersionsAnswer, read_api_versions};

/// Largest response frame accepted (a fetch answer is bounded by the
/// request's max_bytes; this only stops a corrupt size from allocating).
const RESPONSE_BYTES_MAX: usize = 1 << 30;
/// The ApiVersions version asked first (flexible); a broker that does not
/// know it answers in v0 with the versions it does.
const API_VERSIONS_FIRST: i16 = 3;
/// Kafka's UNSUPPORTED_VERSION.
const UNSUPPORTED_VERSION: i16 = 35;
/// ApiVersions requests sent before giving up: the first, the version the
/// broker offered, and v0.
const API_VERSIONS_ATTEMPTS: usize = 3;
/// Bytes of one api key's entry in the v0 layout (key, min, max).
const API_VERSION_ENTRY_BYTES: usize = 6;

type Waiter = oneshot::Sender<Result<Bytes, ClientError>>;
/// Either half of a plain or a TLS stream.
type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// A connection shared by many tasks.
pub struct Connection {
    addr: String,
    client_id: StrBytes,
    timeout: Duration,
    /// Serializes writes and the order of `pending`.
    writer: Mutex<WriteHalf>,
    pending: Arc<std::sync::Mutex<VecDeque<(i32, Waiter)>>>,
    next_correlation: AtomicI32,
    broken: Arc<AtomicBool>,
    /// When a SASL session's lifetime is nearly over: past it, the
    /// connection counts as broken.
    expires_at: Option<Instant>,
    /// API key → (min, max) version the broker supports.
    versions: HashMap<i16, (i16, i16)>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    /// Connects in plaintext and negotiates API versions.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        Self::connect_transport(addr, client_id, timeout, &ClientSecurity::default()).await
    }

    /// Connects as `security` says (TLS, then SASL after ApiVersions) and
    /// negotiates API versions.
    pub(crate) async fn connect_transport(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        security: &ClientSecurity,
    ) -> Result<Self, ClientError> {
        let tls = if security.protocol.uses_tls() {
            Some(super::tls::client_config(security)?)
        } else {
            None
        };
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.to_string(),
                timeout,
            })?
            .map_err(|error| ClientError::Unreachable {
                addr: addr.to_string(),
                error,
            })?;
        let _ = stream.set_nodelay(true);
        let (read, write): (ReadHalf, WriteHalf) = match tls {
            None => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            Some(config) => {
                let stream =
                    tokio::time::timeout(timeout, super::tls::handshake(config, addr, stream))
                        .await
                        .map_err(|_| ClientError::Timeout {
                            addr: addr.to_string(),
                            timeout,
                        })??;
                let (read, write) = tokio::io::split(stream);
                (Box::new(read), Box::new(write))
            }
        };
        let pending: Arc<std::sync::Mutex<VecDeque<(i32, Waiter)>>> = Arc::default();
        let broken = Arc::new(AtomicBool::new(false));
        let reader = tokio::spawn(read_responses(
            read,
            Arc::clone(&pending),
            Arc::clone(&broken),
            addr.to_string(),
        ));
        let mut connection = Self {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            timeout,
            writer: Mutex::new(write),
            pending,
            next_correlation: AtomicI32::new(1),
            broken,
            expires_at: None,
            versions: HashMap::new(),
            reader,
        };
        connection.versions = connection.negotiate().await?;
        Ok(connection)
    }

    /// From `at` on, the connection counts as broken (its SASL session is
    /// about to end).
    pub(crate) fn expire_at(&mut self, at: Instant) {
        self.expires_at = Some(at);
    }

    /// Asks ApiVersions, newest version first. A broker that does not know
    /// the version asked answers UNSUPPORTED_VERSION (KIP-511), in the v0
    /// layout, with the versions of ApiVersions it does know; the request
    /// is sent again in the newest of those.
    async fn negotiate(&self) -> Result<HashMap<i16, (i16, i16)>, ClientError> {
        let mut version = API_VERSIONS_FIRST;
        for _ in 0..API_VERSIONS_ATTEMPTS {
            let mut request = ApiVersionsRequest::default();
            if version >= 3 {
                request = request
                    .with_client_software_name(StrBytes::from_static_str("strata"))
                    .with_client_software_version(StrBytes::from_static_str(env!(
                        "CARGO_PKG_VERSION"
                    )));
            }
            let body = self.submit(&request, version).await?.body().await?;
            match read_api_versions(body, version)? {
                VersionsAnswer::Versions(versions) => return Ok(versions),
                VersionsAnswer::RetryAt(offered) => version = offered,
            }
        }
        Err(ClientError::Protocol(format!(
            "{}: ApiVersions still unsupported after {API_VERSIONS_ATTEMPTS} versions",
            self.addr
        )))
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether the connection failed (it is then replaced, not reused).
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
            || self.expires_at.is_some_and(|at| Instant::now() >= at)
    }

    /// The version to send `R` in: the newest both this client (up to
    /// `ours_max`) and the broker speak.
    pub fn version<R: Request>(&self, ours_max: i16) -> Result<i16, ClientError> {
        let unsupported = || ClientError::UnsupportedApi {
            addr: self.addr.clone(),
            api: ApiKey::try_from(R::KEY).map_or_else(|_| R::KEY.to_string(), |k| format!("{k:?}")),
        };
        let (min, max) = *self.versions.get(&R::KEY).ok_or_else(unsupported)?;
        let ours_max = ours_max.min(R::VERSIONS.max);
        let version = max.min(ours_max);
        if version < min.max(R::VERSIONS.min) {
            return Err(unsupported());
        }
        Ok(version)
    }

    /// Sends `request` in the negotiated version (at most `ours_max`).
    pub async fn send<R: Request>(
        &self,
        request: &R,
        ours_max: i16,
    ) -> Result<R::Response, ClientError> {
        let version = self.version::<R>(ours_max)?;
        self.send_versioned(request, version).await
    }

    /// Sends `request` in `version` and waits for its response.
    pub async fn send_versioned<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.submit(request, version).await?.response().await
    }

    /// Sends `request` in `version` and returns the body of its answer,
    /// undecoded (for an answer some brokers lay out off the schema).
    pub(crate) async fn send_for_body<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<Bytes, ClientError> {
        self.submit(request, version).await?.body().await
    }

    /// Writes `request` now and returns its response to wait for later.
    /// Requests submitted one after another by one task reach the broker,
    /// and are answered, in that order.
    pub async fn submit<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<PendingResponse<R>, ClientError> {
        let (correlation_id, frame) = self.frame(request, version)?;
        self.write_awaiting(&[frame], correlation_id, version).await
    }

    /// Like [`Connection::submit`] for a request the caller frames itself
    /// as chunks (size prefix, header and body; `frame` is given the
    /// correlation id and client id), written in order without being
    /// joined. With `answered` false nothing is waited for (acks=0).
    pub(crate) async fn submit_framed<R: Request>(
        &self,
        version: i16,
        answered: bool,
        frame: impl FnOnce(i32, &str) -> Vec<Bytes>,
    ) -> Result<Option<PendingResponse<R>>, ClientError> {
        let correlation_id = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let parts = frame(correlation_id, self.client_id.as_str());
        if !answered {
            self.write_parts(&parts, None).await?;
            return Ok(None);
        }
        self.write_awaiting(&parts, correlation_id, version)
            .await
            .map(Some)
    }

    /// Writes a request's chunks and returns its response to wait for.
    async fn write_awaiting<R: Request>(
        &self,
        parts: &[Bytes],
        correlation_id: i32,
        version: i16,
    ) -> Result<PendingResponse<R>, ClientError> {
        let (sender, receiver) = oneshot::channel();
        self.write_parts(parts, Some((correlation_id, sender)))
            .await?;
        Ok(PendingResponse {
            receiver,
            correlation_id,
            version,
            timeout: self.timeout,
            addr: self.addr.clone(),
            broken: Arc::clone(&self.broken),
            _request: std::marker::PhantomData,
        })
    }

    /// Sends a request the broker will not answer (Produce with acks=0).
    pub async fn send_no_response<R: Request>(
        &self,
        request: &R,
        ours_max: i16,
    ) -> Result<(), ClientError> {
        let version = self.version::<R>(ours_max)?;
        let (_, frame) = self.frame(request, version)?;
        self.write(frame, None).await
    }

    fn frame<R: Request>(&self, request: &R, version: i16) -> Result<(i32, Bytes), ClientError> {
        let correlation_id = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::with_capacity(64);
        buf.extend_from_slice(&[0; 4]);
        header
            .encode(&mut buf, R::header_version(version))
            .and_then(|()| request.encode(&mut buf, version))
            .map_err(|e| ClientError::Invalid(format!("encoding a request: {e}")))?;
        let size = i32::try_from(buf.len() - 4)
            .map_err(|_| ClientError::Invalid("request larger than 2 GiB".into()))?;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        Ok((correlation_id, buf.freeze()))
    }

    async fn write(&self, frame: Bytes, waiter: Option<(i32, Waiter)>) -> Result<(), ClientError> {
        self.write_parts(&[frame], waiter).await
    }

    /// Writes one request's chunks back to back; its response is expected
    /// after those of every request written before.
    async fn write_parts(
        &self,
        parts: &[Bytes],
        waiter: Option<(i32, Waiter)>,
    ) -> Result<(), ClientError> {
        if self.is_broken() {
            return Err(self.disconnected(Broken::FailedEarlier));
        }
        let mut writer = self.writer.lock().await;
        if let Some(waiter) = waiter {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_back(waiter);
        }
        // Dropped mid-write (the caller was cancelled), the connection holds
        // a partial frame or a waiter for a request never sent: give it up.
        let unfinished = BreakUnlessDone(Some(&self.broken));
        if let Err(error) = write_all_vectored(&mut writer, parts).await {
            return Err(self.disconnected(Broken::Write(Arc::new(error))));
        }
        unfinished.done();
        Ok(())
    }

    fn disconnected(&self, why: Broken) -> ClientError {
        ClientError::Disconnected {
            addr: self.addr.clone(),
            why,
        }
    }
}

/// Marks a connection broken when dropped before [`BreakUnlessDone::done`].
struct BreakUnlessDone<'a>(Option<&'a AtomicBool>);

impl BreakUnlessDone<'_> {
    fn done(mut self) {
        self.0 = None;
    }
}

impl Drop for BreakUnlessDone<'_> {
    fn drop(&mut self) {
        if let Some(broken) = self.0 {
            broken.store(true, Ordering::Relaxed);
        }
    }
}

/// Writes every chunk, in order, with as few writev calls as the socket
/// allows (one request leaves in one go rather than a packet per chunk).
async fn write_all_vectored(writer: &mut WriteHalf, parts: &[Bytes]) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> =
        parts.iter().map(|p| std::io::IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let written = writer.write_vectored(rest).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut rest, written);
    }
    Ok(())
}

/// The response to a request already written ([`Connection::submit`]).
pub struct PendingResponse<R: Request> {
    receiver: oneshot::Receiver<Result<Bytes, ClientError>>,
    correlation_id: i32,
    version: i16,
    timeout: Duration,
    addr: String,
    broken: Arc<AtomicBool>,
    _request: std::marker::PhantomData<fn() -> R>,
}

impl<R: Request> PendingResponse<R> {
    /// Waits for the response (up to the connection's timeout) and decodes it.
    pub async fn response(self) -> Result<R::Response, ClientError> {
        let version = self.version;
        let mut body = self.body().await?;
        let decoded = R::Response::decode(&mut body, version)
            .map_err(|e| ClientError::Protocol(format!("response body: {e}")))?;
        if body.has_remaining() {
            // Ignored, as Kafka's Java client and librdkafka ignore them
            // (librdkafka's mock ends some flexible answers with a second
            // empty tag section).
            tracing::debug!(
                "{} bytes after the answer to request key {}",
                body.remaining(),
                R::KEY
            );
        }
        Ok(decoded)
    }

    /// Waits for the response and returns its body, undecoded, once its
    /// header shows it answers this request.
    async fn body(self) -> Result<Bytes, ClientError> {
        let disconnected = |why: Broken| ClientError::Disconnected {
            addr: self.addr.clone(),
            why,
        };
        let mut response = match tokio::time::timeout(self.timeout, self.receiver).await {
            Ok(Ok(result)) => result?,
            Ok(Err(_)) => return Err(disconnected(Broken::Closed)),
            Err(_) => {
                // Responses come in order: one that never comes blocks all
                // that follow, so the connection is given up.
                self.broken.store(true, Ordering::Relaxed);
                return Err(ClientError::Timeout {
                    addr: self.addr.clone(),
                    timeout: self.timeout,
                });
            }
        };
        let header_version =
            <R::Response as kafka_protocol::protocol::HeaderVersion>::header_version(self.version);
        let header = ResponseHeader::decode(&mut response, header_version)
            .map_err(|e| ClientError::Protocol(format!("response header: {e}")))?;
        if header.correlation_id != self.correlation_id {
            self.broken.store(true, Ordering::Relaxed);
            return Err(ClientError::Protocol(format!(
                "response for correlation id {} where {} was due",
                header.correlation_id, self.correlation_id
            )));
        }
        Ok(response)
    }
}

/// Decodes an answer whose error form some brokers write off the schema
/// (librdkafka's mock writes null for strings that may not be null beside
/// an error code): the answer, or, when it does not decode but holds a
/// non-zero error code at byte `error_at`, that code.
pub(crate) fn decode_or_error_code<T: Decodable>(
    mut body: Bytes,
    version: i16,
    error_at: usize,
) -> Result<Result<T, i16>, ClientError> {
    let raw = body.clone();
    match T::decode(&mut body, version) {
        Ok(decoded) => Ok(Ok(decoded)),
        Err(error) => match raw.get(error_at..error_at + 2) {
            Some(code) if code != [0, 0] => Ok(Err(i16::from_be_bytes([code[0], code[1]]))),
            _ => Err(ClientError::Protocol(format!("response body: {error}"))),
        },
    }
}

/// Reads response frames and hands each to the oldest waiting request.
async fn read_responses(
    mut read: ReadHalf,
    pending: Arc<std::sync::Mutex<VecDeque<(i32, Waiter)>>>,
    broken: Arc<AtomicBool>,
    addr: String,
) {
    let failure = loop {
        let mut size = [0u8; 4];
        if let Err(error) = read.read_exact(&mut size).await {
            break Broken::Read(Arc::new(error));
        }
        let size = i32::from_be_bytes(size);
        let too_big = Broken::ResponseSize {
            size: i64::from(size),
            limit: RESPONSE_BYTES_MAX,
        };
        let Ok(size) = usize::try_from(size) else {
            break too_big;
        };
        if size > RESPONSE_BYTES_MAX {
            break too_big;
        }
        let mut body = vec![0u8; size];
        if let Err(error) = read.read_exact(&mut body).await {
            break Broken::Read(Arc::new(error));
        }
        let waiter = pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        match waiter {
            Some((_, waiter)) => {
                let _ = waiter.send(Ok(Bytes::from(body)));
            }
            None => break Broken::Unasked,
        }
    };
    broken.store(true, Ordering::Relaxed);
    let waiters: Vec<(i32, Waiter)> = pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .collect();
    for (_, waiter) in waiters {
        let _ = waiter.send(Err(ClientError::Disconnected {
            addr: addr.clone(),
            why: failure.clone(),
        }));
    }
}

#[cfg(test)]
mod tests;

//! A connection's reading side: one request at a time until it has logged
//! in ([`super::pre_auth`]), then reading ahead, each frame through the
//! reader's steps ([`super::reader`]).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::io::AsyncRead;

use super::pre_auth;
use super::reader::Reader;

/// Reads requests into the queue until EOF, a bad frame, idleness or the
/// login timeout (then `None`): one at a time until the connection has
/// authenticated, then reading ahead, holding back only while its
/// in-flight slots or the request memory budget are used up. At shutdown
/// the connection stops polling it, wherever it waits.
pub(super) async fn read_requests<R: AsyncRead + Unpin>(
    mut reader: Reader<'_, R>,
    authenticated: &AtomicBool,
    login_timeout: Option<Duration>,
) -> Option<()> {
    pre_auth::log_in(&mut reader, authenticated, login_timeout).await?;
    let limit = reader.ctx.config.request_bytes_max;
    let budgets = reader.memory;
    loop {
        let slot = reader.slots(1).await?;
        let size = reader.size(limit, 1).await?;
        let memory = reader.reserve(&budgets.shared, size).await?;
        let frame = reader.body(size).await?;
        reader.queue(frame, memory, slot).await?;
    }
}

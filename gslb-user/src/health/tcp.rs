//! TCP connect monitor: the target accepts a connection.

use std::net::SocketAddr;

use tokio::net::TcpStream;

use super::CheckError;

/// Connects to `addr` and closes the connection at once.
pub(super) async fn connect(addr: SocketAddr) -> Result<(), CheckError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(CheckError::Connect)?;
    drop(stream);
    Ok(())
}

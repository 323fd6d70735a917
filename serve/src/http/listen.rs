//! The listeners: the API on TCP (and on a Unix socket with `--uds-path`), and /metrics alone on
//! `--prometheus-port`. hyper's own accept loop rather than axum::serve, which sets no timer and
//! so no header read timeout: a client that sends its headers a byte at a time is cut off.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};

#[cfg(unix)]
pub type UnixListener = tokio::net::UnixListener;
/// No Unix sockets here: `unix` refuses `--uds-path`.
#[cfg(not(unix))]
pub enum UnixListener {}

/// Binds the Unix socket at `path`. A socket left there by an earlier run is replaced; any other
/// file is refused.
#[cfg(unix)]
pub fn unix(path: &Path) -> Result<UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!("--uds-path {}: a file that is not a socket is there", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("--uds-path {}", path.display()))?;
    }
    UnixListener::bind(path).with_context(|| format!("binding --uds-path {}", path.display()))
}

#[cfg(not(unix))]
pub fn unix(path: &Path) -> Result<UnixListener> {
    bail!("--uds-path {}: Unix sockets need a Unix system", path.display())
}

/// Serves `router` (the /metrics route alone) on `host:port`. A port that cannot be bound is
/// reported and left: the API serves on, with /metrics on its own port as well.
pub async fn prometheus(host: &str, port: u16, router: Router) {
    match tokio::net::TcpListener::bind((host, port)).await {
        Ok(listener) => {
            if let Ok(address) = listener.local_addr() {
                log::info!("metrics on {address}");
            }
            let never = std::future::pending::<()>();
            tokio::spawn(serve(listener, None, router, Duration::from_secs(30), never));
        }
        Err(e) => log::warn!(
            "--prometheus-port {port}: cannot listen on {host}:{port} ({e}); the metrics stay on the API's /metrics"
        ),
    }
}

/// Accepts connections until `shutdown`, then stops accepting and lets every connection finish
/// the request it has begun. With the `grpc` feature, each connection speaks HTTP/1.1 or HTTP/2
/// (gRPC), as its first bytes say; without it, HTTP/1.1.
pub async fn serve(
    listener: tokio::net::TcpListener,
    unix: Option<UnixListener>,
    router: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let http = connections(header_read_timeout);
    let service = hyper_util::service::TowerToHyperService::new(router);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted.map(|(stream, _)| {
                let _ = stream.set_nodelay(true);
                spawn(graceful.watch(connection(&http, TokioIo::new(stream), service.clone())));
            }),
            accepted = accept_unix(unix.as_ref()) => accepted.map(|stream| {
                spawn(graceful.watch(connection(&http, TokioIo::new(stream), service.clone())));
            }),
            _ = &mut shutdown => break,
        };
        // Out of file descriptors, say: the next accept may succeed.
        if let Err(e) = accepted {
            log::warn!("accepting a connection: {e}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

fn spawn<T: Send + 'static>(connection: impl Future<Output = T> + Send + 'static) {
    tokio::spawn(async move {
        let _ = connection.await;
    });
}

type Service = hyper_util::service::TowerToHyperService<Router>;

#[cfg(not(feature = "grpc"))]
fn connections(header_read_timeout: Duration) -> hyper::server::conn::http1::Builder {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    http
}

#[cfg(not(feature = "grpc"))]
fn connection<I>(
    http: &hyper::server::conn::http1::Builder,
    io: I,
    service: Service,
) -> hyper::server::conn::http1::Connection<I, Service>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    http.serve_connection(io, service)
}

#[cfg(feature = "grpc")]
type Auto = hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>;

#[cfg(feature = "grpc")]
fn connections(header_read_timeout: Duration) -> Auto {
    let mut http = Auto::new(hyper_util::rt::TokioExecutor::new());
    http.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    http
}

#[cfg(feature = "grpc")]
fn connection<I>(
    http: &Auto,
    io: I,
    service: Service,
) -> hyper_util::server::conn::auto::Connection<'static, I, Service, hyper_util::rt::TokioExecutor>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    http.serve_connection(io, service).into_owned()
}

/// The next connection on the Unix socket; never, without one.
#[cfg(unix)]
async fn accept_unix(unix: Option<&UnixListener>) -> std::io::Result<tokio::net::UnixStream> {
    match unix {
        Some(listener) => listener.accept().await.map(|(stream, _)| stream),
        None => std::future::pending().await,
    }
}

/// No Unix sockets: never a connection (the stream type is any that would serve).
#[cfg(not(unix))]
async fn accept_unix(unix: Option<&UnixListener>) -> std::io::Result<tokio::net::TcpStream> {
    match unix {
        Some(never) => match *never {},
        None => std::future::pending().await,
    }
}

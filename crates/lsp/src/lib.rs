//! The language server: `tilec lsp` on stdio (tower-lsp-server's service, on this crate's own
//! [`transport`]). Diagnostics as you type, layouts
//! in hovers, registers and shared memory as inlay hints, a code action for the serial-loop layout
//! conflict, symbols, go to definition, and the custom requests `tilec/cudaSource`,
//! `tilec/layoutSvg`, `tilec/runKernel` and `tilec/explain` that the VS Code extension uses.
//!
//! Invariants of this crate:
//! - It runs no compiler pass directly: every answer comes from `tilec-db` queries through
//!   `tilec-ide`, so the editor shows exactly what `tilec check` reports.
//! - One thread owns the database and applies edits in order; reads run on snapshots and are
//!   cancelled by edits (see [`host`]). Nothing async ever blocks on salsa.
//! - stdout carries the protocol: logs go to stderr (`TILEC_LOG` sets the filter).
//! - Nothing a user types takes the server down: a read that panics is answered with an internal
//!   error and the worker lives on; kernels run in a child process.
//! - Nothing a client sends takes it down either: a message that cannot be decoded is answered
//!   with the JSON-RPC error for it or logged, and skipped ([`transport`], [`framing`]); only
//!   `exit` and the end of the input end the session.
//! - Its I/O is the protocol, the tilec.toml beside a document ([`workspace`]), the child
//!   process of `tilec/runKernel`, and one look whether the source tree's `docs/codes/` is on this
//!   machine (diagnostics link to those pages). `tilec tune`'s store is read by the
//!   [`LspOptions::tuned`] the binary hands in, not by this crate.

mod framing;
mod handlers;
mod host;
mod last_good;
mod lines;
mod server;
mod transport;
pub mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tower_lsp_server::LspService;

pub use server::Backend;

/// How the server is set up.
#[derive(Clone, Debug)]
pub struct LspOptions {
    /// The `tilec` executable `tilec/runKernel` runs (the server's own binary).
    pub tilec_exe: PathBuf,
    /// Worker threads for reads.
    pub workers: usize,
    /// Tests only: each read waits this long before it starts, so that an edit can arrive while
    /// it runs (`TILEC_LSP_READ_DELAY_MS`).
    pub read_delay: Option<Duration>,
    /// What `tilec tune` measured, for the tuning lenses: the `tilec` binary reads its store (this
    /// crate reaches it only through `tilec-ide`'s interface); without it the lenses show the
    /// model's recommendations only.
    pub tuned: Option<Arc<dyn tilec_ide::tune::TunedResults>>,
}

impl LspOptions {
    /// The defaults for `tilec lsp`: this executable, two workers, and the read delay from the
    /// environment.
    pub fn for_current_exe() -> LspOptions {
        let read_delay = std::env::var("TILEC_LSP_READ_DELAY_MS")
            .ok()
            .and_then(|ms| ms.parse::<u64>().ok())
            .map(Duration::from_millis);
        LspOptions {
            tilec_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tilec")),
            workers: 2,
            read_delay,
            tuned: None,
        }
    }
}

/// Serves on any byte streams (stdio for `tilec lsp`, in-memory pipes in tests) until the client
/// sends `exit` or the input ends; no message, however malformed, ends it sooner.
pub async fn serve<I, O>(input: I, output: O, options: LspOptions)
where
    I: tokio::io::AsyncRead + Unpin,
    O: tokio::io::AsyncWrite + Unpin,
{
    let (service, socket) = LspService::build(move |client| Backend::new(client, options))
        .custom_method("tilec/cudaSource", Backend::cuda_source)
        .custom_method("tilec/layoutSvg", Backend::layout_svg)
        .custom_method("tilec/runKernel", Backend::run_kernel)
        .custom_method("tilec/explain", Backend::explain)
        .finish();
    transport::serve(input, output, service, socket).await;
}

/// `tilec lsp`: logs to stderr, serves on stdin and stdout.
pub fn run_stdio(options: LspOptions) -> std::io::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(log_filter(
        std::env::var("TILEC_LOG").ok().as_deref(),
    ))
    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(serve(tokio::io::stdin(), tokio::io::stdout(), options));
    Ok(())
}

/// The log filter for a `TILEC_LOG` value. Salsa logs a line per query execution at `info`, which
/// buries tilec's own lines (ten thousand in a quarter of an hour of editing), so its target is held
/// at `warn` unless the value names salsa itself: `TILEC_LOG=info,salsa=info` still shows them.
fn log_filter(tilec_log: Option<&str>) -> String {
    let requested = tilec_log.map(str::trim).filter(|value| !value.is_empty());
    match requested {
        None => "warn".to_owned(),
        Some(value) if value.contains("salsa") => value.to_owned(),
        Some(value) => format!("{value},salsa=warn"),
    }
}

#[cfg(test)]
mod log_filter_tests {
    use super::log_filter;

    #[test]
    fn salsa_is_held_at_warn_unless_named() {
        assert_eq!(log_filter(None), "warn");
        assert_eq!(log_filter(Some("  ")), "warn");
        assert_eq!(log_filter(Some("info")), "info,salsa=warn");
        assert_eq!(log_filter(Some("debug,salsa=info")), "debug,salsa=info");
    }
}

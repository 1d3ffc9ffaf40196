//! Editor-facing analysis: what the language server shows (hovers, inlay hints, symbols,
//! definitions, code actions, layout pictures) and what `tilec layout` prints, as plain data.
//!
//! Invariants of this crate:
//! - It never does I/O and knows nothing of the LSP's types or of JSON: positions are byte offsets
//!   into the file's text (the server converts them), results are strings and spans.
//! - It reads analysis results only through `tilec-db` queries and the result types they return; it
//!   runs no compiler pass itself, so what the editor shows is exactly what `tilec check` computed.
//! - Nothing here panics on what a user types: every lookup that can miss returns `None`.

mod actions;
mod cuda;
mod cursor;
pub mod describe;
mod explain;
mod hover;
mod inlay;
mod navigation;
pub mod svg;
pub mod tune;

#[cfg(test)]
mod tests;

pub use actions::{CodeAction, TextEdit, code_actions, manifest_instance};
pub use cuda::cuda_text;
pub use cursor::{KernelAt, first_line, identifier_at, instance_label, kernel_at, kernels};
pub use explain::explain_page;
pub use hover::{Hover, hover};
pub use inlay::{InlayHint, inlay_hints};
pub use navigation::{Symbol, SymbolKind, document_symbols, goto_definition};

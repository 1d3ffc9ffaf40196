//! The language server end to end: the real `tilec lsp` over stdio, driven by a scripted client
//! (`client.rs`). One test binary with submodules, as ty's e2e tests are organised.

mod client;
mod editing;
mod features;
mod robustness;
mod soak;

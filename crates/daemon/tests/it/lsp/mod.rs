//! The language server end to end: the real `tilec lsp` over stdio, driven by a scripted client
//! (`client.rs`). Submodules of the daemon's one integration-test binary, as ty's e2e tests are
//! organised.

mod client;
mod editing;
mod editor;
mod features;
mod robustness;
mod soak;

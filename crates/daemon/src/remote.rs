//! The remote tier of the build cache: a store shared by many machines (Redis, S3, GCS, the GitHub
//! Actions cache, WebDAV), reached through OpenDAL, holding the same self-checking entry files as
//! the local cache folder under the same paths (`cache::entry_path`).
//!
//! The remote is an optimisation, never a dependency: every operation runs under a timeout, the
//! first failure (an error or a timeout) marks the store unavailable for the rest of the build with
//! one warning, and from then on the build goes on from local work alone. Nothing read from the
//! store is used before `cache::check_entry` has checked its checksum, key and request.
//!
//! Credentials come from the store's usual places (the URL's user information or `REDIS_PASSWORD`
//! for Redis, the AWS variables and profiles for S3, the Google ones for GCS, `ACTIONS_*` for the
//! GitHub Actions cache) and are never printed: every message names the store by [`mask_url`].
//!
//! OpenDAL is asynchronous; this module owns a small current-thread tokio runtime and blocks on it,
//! so the rest of the build stays plain threads. Reads and writes of one build run concurrently
//! on it (a handful at a time), which is what makes a warm remote fast.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::stream::{self, StreamExt};
use opendal::{ErrorKind, Operator, OperatorUri};

use crate::cache::{Lookup, Request, check_entry, entry_path};

/// How many reads or writes are in flight at once.
const CONCURRENCY: usize = 16;

/// How long one operation may take before the store is taken for unavailable, unless
/// `TILEC_CACHE_REMOTE_TIMEOUT` (seconds) says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether a build may write to the remote store (`--cache-remote-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RemoteMode {
    /// Read entries and store what this build compiled.
    ReadWrite,
    /// Read entries only: for untrusted jobs (pull requests from forks), whose entries others
    /// should not receive.
    ReadOnly,
}

impl RemoteMode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RemoteMode::ReadWrite => "read-write",
            RemoteMode::ReadOnly => "read-only",
        }
    }
}

/// The remote store's URL: `TILEC_CACHE_REMOTE` when set (empty: no remote), else the
/// `[cache] remote` of the tilec.toml.
pub(crate) fn configured_url(manifest: Option<&str>) -> Option<String> {
    match std::env::var("TILEC_CACHE_REMOTE") {
        Ok(url) if url.trim().is_empty() => None,
        Ok(url) => Some(url.trim().to_owned()),
        Err(_) => manifest.map(str::to_owned),
    }
}

/// An open remote store.
#[derive(Debug)]
pub(crate) struct RemoteCache {
    operator: Operator,
    runtime: tokio::runtime::Runtime,
    /// The URL with its secrets masked: the only form in which the store is ever printed.
    shown: String,
    mode: RemoteMode,
    timeout: Duration,
    /// Secrets that must not reach a message (a password), replaced by `****` wherever they
    /// appear in an error OpenDAL reports.
    secrets: Vec<String>,
    /// Set at the first failure: the store is not asked again during this build.
    down: AtomicBool,
}

/// What a read of one entry gave.
#[derive(Debug)]
pub(crate) enum Fetched<E> {
    /// The store's answer, checked, and how many bytes it was.
    Checked(Lookup<E>, u64),
    /// The store was not asked (it is down) or did not answer.
    Unavailable,
}

impl RemoteCache {
    /// Opens the store at `url`. An error says why in words that name the store only by its
    /// masked URL; the caller warns and builds without it.
    pub(crate) fn open(url: &str, mode: RemoteMode) -> Result<RemoteCache> {
        let shown = mask_url(url);
        let (uri, secrets) =
            operator_uri(url).with_context(|| format!("cannot use the remote cache {shown}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the remote cache's runtime")?;
        opendal::install_default();
        // TLS (https stores, `rediss://`) through rustls with ring's primitives: the transport is
        // built without a provider of its own, as the default one (aws-lc) doubled the build
        // time of the whole workspace. Installing fails only when one is installed already.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
        opendal_http_transport_reqwest::install_default();
        // Some services make their clients on construction, inside the runtime they will use.
        let operator = {
            let _inside = runtime.enter();
            Operator::from_uri(uri)
        }
        .map_err(|error| {
            anyhow::anyhow!(
                "cannot use the remote cache {shown}: {}",
                scrub(&error.to_string(), &secrets)
            )
        })?;
        Ok(RemoteCache {
            operator,
            runtime,
            shown,
            mode,
            timeout: timeout_from_env(),
            secrets,
            down: AtomicBool::new(false),
        })
    }

    /// The store's URL with its secrets masked.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    pub(crate) fn mode(&self) -> RemoteMode {
        self.mode
    }

    /// Whether a failure has taken the store out of this build.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// The entries answering `requests`, in their order, fetched concurrently and checked.
    pub(crate) fn fetch<R: Request>(&self, requests: &[&R]) -> Vec<Fetched<R::Entry>> {
        if requests.is_empty() || self.is_down() {
            return requests.iter().map(|_| Fetched::Unavailable).collect();
        }
        self.runtime.block_on(
            stream::iter(requests.iter().map(|request| self.fetch_one(*request)))
                .buffered(CONCURRENCY)
                .collect(),
        )
    }

    async fn fetch_one<R: Request>(&self, request: &R) -> Fetched<R::Entry> {
        if self.is_down() {
            return Fetched::Unavailable;
        }
        let path = entry_path(request.key());
        match tokio::time::timeout(self.timeout, self.operator.read(&path)).await {
            Ok(Ok(buffer)) => {
                let bytes = buffer.to_vec();
                let place = format!("{}/{path}", self.shown.trim_end_matches('/'));
                let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
                Fetched::Checked(check_entry(&bytes, request, &place), size)
            }
            Ok(Err(error)) if error.kind() == ErrorKind::NotFound => {
                Fetched::Checked(Lookup::Miss, 0)
            }
            Ok(Err(error)) => {
                self.fail(&error.to_string());
                Fetched::Unavailable
            }
            Err(_) => {
                self.fail_on_timeout();
                Fetched::Unavailable
            }
        }
    }

    /// Stores the entry files `entries` (a key and its bytes each), concurrently, unless the
    /// store is read-only or down. Returns the bytes stored.
    pub(crate) fn store(&self, entries: &[(String, Vec<u8>)]) -> u64 {
        if self.mode == RemoteMode::ReadOnly || self.is_down() || entries.is_empty() {
            return 0;
        }
        let stored: Vec<u64> = self.runtime.block_on(
            stream::iter(
                entries
                    .iter()
                    .map(|(key, bytes)| self.store_one(key, bytes)),
            )
            .buffer_unordered(CONCURRENCY)
            .collect(),
        );
        stored.iter().sum()
    }

    /// One entry, written whole: every service OpenDAL offers here replaces an object or key in
    /// one request (Redis `SET`, an S3 or GCS `PUT`), so a reader sees the old entry or the new.
    async fn store_one(&self, key: &str, bytes: &[u8]) -> u64 {
        if self.is_down() {
            return 0;
        }
        let path = entry_path(key);
        let write = self.operator.write(&path, bytes.to_vec());
        match tokio::time::timeout(self.timeout, write).await {
            Ok(Ok(_)) => u64::try_from(bytes.len()).unwrap_or(u64::MAX),
            Ok(Err(error)) => {
                self.fail(&error.to_string());
                0
            }
            Err(_) => {
                self.fail_on_timeout();
                0
            }
        }
    }

    fn fail_on_timeout(&self) {
        let seconds = self.timeout.as_secs_f64();
        self.fail(&format!("no answer within {seconds} s"));
    }

    /// Takes the store out of this build, warning once with why (secrets masked).
    fn fail(&self, why: &str) {
        if !self.down.swap(true, Ordering::Relaxed) {
            eprintln!(
                "warning: the remote cache {} is unavailable ({}); building from local work \
                 without it",
                self.shown,
                scrub(why, &self.secrets)
            );
        }
    }
}

/// `TILEC_CACHE_REMOTE_TIMEOUT` in seconds, else [`DEFAULT_TIMEOUT`].
fn timeout_from_env() -> Duration {
    std::env::var("TILEC_CACHE_REMOTE_TIMEOUT")
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0 && *seconds < 3600.0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64)
}

/// The OpenDAL URI for `url`, and the secrets it holds. A Redis password in the URL, or else in
/// `REDIS_PASSWORD` (with `REDIS_USERNAME`), becomes the service's option: OpenDAL's Redis service
/// reads only the host and database from the URL.
fn operator_uri(url: &str) -> Result<(OperatorUri, Vec<String>)> {
    let parsed = OperatorUri::new(url, Vec::<(String, String)>::new())
        .map_err(|error| anyhow::anyhow!("not a store URL ({})", error.kind()))?;
    let scheme = parsed.scheme().to_owned();
    if !["redis", "s3", "gcs", "ghac", "webdav"].contains(&scheme.as_str()) {
        bail!("unknown store `{scheme}` (expected redis, s3, gcs, ghac or webdav)");
    }
    let mut options: Vec<(String, String)> = Vec::new();
    let mut secrets: Vec<String> = Vec::new();
    if scheme == "redis" {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let password = parsed
            .password()
            .map(str::to_owned)
            .or_else(|| env("REDIS_PASSWORD"));
        let username = parsed
            .username()
            .map(str::to_owned)
            .or_else(|| env("REDIS_USERNAME"));
        if let Some(password) = password {
            secrets.push(password.clone());
            options.push(("password".to_owned(), password));
        }
        if let Some(username) = username {
            options.push(("username".to_owned(), username));
        }
    } else if let Some(password) = parsed.password() {
        secrets.push(password.to_owned());
    }
    secrets.extend(secret_query_values(url));
    let uri = OperatorUri::new(url, options)
        .map_err(|error| anyhow::anyhow!("not a store URL ({})", error.kind()))?;
    Ok((uri, secrets))
}

/// Whether a query parameter's name says it holds a secret (`secret_access_key`, `token`, ...).
fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "secret",
        "password",
        "token",
        "key",
        "credential",
        "signature",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// The values of the URL's query parameters whose names say they are secrets.
fn secret_query_values(url: &str) -> Vec<String> {
    let Some((_, query)) = url.split_once('?') else {
        return Vec::new();
    };
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(name, value)| is_secret_name(name) && !value.is_empty())
        .map(|(_, value)| value.to_owned())
        .collect()
}

/// `url` with its password and secret query values replaced by `****`, for every message:
/// `redis://:hunter2@cache:6379/0` is shown as `redis://:****@cache:6379/0`.
pub(crate) fn mask_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut shown = mask_userinfo(head);
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value)) if is_secret_name(name) && !value.is_empty() => {
                    format!("{name}=****")
                }
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

/// `scheme://user:password@host/...` with the password masked; anything else as given.
fn mask_userinfo(head: &str) -> String {
    let Some((scheme, rest)) = head.split_once("://") else {
        return head.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return head.to_owned();
    };
    let user = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:****"),
        None => userinfo.to_owned(),
    };
    format!("{scheme}://{user}@{host}{path}")
}

/// `text` with every secret replaced by `****`.
fn scrub(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|secret| !secret.is_empty())
        .fold(text.to_owned(), |text, secret| {
            text.replace(secret.as_str(), "****")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_secret_parameters_are_masked() {
        assert_eq!(
            mask_url("redis://:hunter2@cache.internal:6379/0"),
            "redis://:****@cache.internal:6379/0"
        );
        assert_eq!(
            mask_url("redis://tilec:hunter2@127.0.0.1:6379/0"),
            "redis://tilec:****@127.0.0.1:6379/0"
        );
        assert_eq!(
            mask_url("s3://bucket/prefix?region=us-east-1&secret_access_key=abc/def"),
            "s3://bucket/prefix?region=us-east-1&secret_access_key=****"
        );
        assert_eq!(
            mask_url("redis://127.0.0.1:6379/0"),
            "redis://127.0.0.1:6379/0"
        );
        // An `@` in the path is not user information.
        assert_eq!(mask_url("webdav://host/a@b"), "webdav://host/a@b");
    }

    #[test]
    fn secrets_are_scrubbed_from_messages() {
        let secrets = vec!["hunter2".to_owned()];
        assert_eq!(
            scrub("auth failed for hunter2 at host", &secrets),
            "auth failed for **** at host"
        );
    }

    #[test]
    fn an_unknown_store_is_refused_with_its_name() {
        let error = RemoteCache::open("ftp://user:hunter2@host/x", RemoteMode::ReadWrite)
            .err()
            .map(|error| format!("{error:#}"))
            .unwrap_or_default();
        assert!(error.contains("unknown store `ftp`"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn a_redis_password_becomes_an_option_and_a_secret() {
        let (uri, secrets) = operator_uri("redis://:hunter2@127.0.0.1:6379/0").expect("parses");
        assert_eq!(
            uri.options().get("password").map(String::as_str),
            Some("hunter2")
        );
        assert_eq!(secrets, vec!["hunter2".to_owned()]);
    }
}

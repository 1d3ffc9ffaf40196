//! The build cache's two tiers together, and what a build tells of them: the local folder first
//! (`cache.rs`), then the remote store when one is configured (`remote.rs`), and the statistics
//! `tilec build` prints, in the spirit of `sccache --show-stats`.
//!
//! Both kinds of entries (`cache.rs`: an instance's lowering, a launch's compilation) go through
//! the same tiers. A remote hit is copied into the local folder, so that the next build on this
//! machine finds it there; what a build makes is stored locally at once and sent to the remote
//! store at the end (read-write mode only). A damaged or mismatched entry in either tier is
//! reported and rebuilt; the rebuilt entry replaces it in both.

use serde_json::{Value, json};

use crate::cache::{Cache, Lookup, Request};
use crate::remote::{Fetched, RemoteCache, RemoteMode};

/// One entry to look up: its cache request, and the name of what it is for, for messages.
#[derive(Debug)]
pub(crate) struct Wanted<'a, R> {
    pub stem: &'a str,
    pub request: &'a R,
}

/// Where the entries one [`look_up`] found came from.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub local_hits: usize,
    pub remote_hits: usize,
    pub bytes_down: u64,
}

/// What the cache did for one build. Counts are of launches (a kernel instance has one or more).
#[derive(Debug, Default)]
pub(crate) struct CacheStats {
    pub local_hits: usize,
    pub remote_hits: usize,
    /// Launches found in neither tier: built by this build.
    pub misses: usize,
    /// Instances whose lowering came from an instance entry (neither lowered nor compiled when
    /// their launch entries were there too).
    pub instance_hits: usize,
    /// Instances this build lowered (not those whose errors stopped them before).
    pub lowered: usize,
    /// Compilations NVRTC ran (none with `--emit cuda` or without NVRTC).
    pub nvrtc_calls: usize,
    pub bytes_down: u64,
    pub bytes_up: u64,
    /// The compile time the hits' entries record: what building them again would have cost.
    pub saved_ms: u64,
    /// The remote store, masked, and its mode; `None` without one.
    pub remote: Option<(String, RemoteMode)>,
    /// Whether the remote store failed during the build (it was warned about).
    pub remote_down: bool,
}

/// Opens the remote store at `url`, if any; a store that cannot be opened is warned about once
/// and the build goes on without it.
pub(crate) fn open_remote(url: Option<String>, mode: RemoteMode) -> Option<RemoteCache> {
    match RemoteCache::open(&url?, mode) {
        Ok(remote) => Some(remote),
        Err(error) => {
            eprintln!("warning: {error:#}; building without the remote cache");
            None
        }
    }
}

/// The entry for each of `wanted`, from the local folder or else the remote store, when one is
/// there and `usable`; `None` for what is to be built. `remote_down` is set when the store failed.
pub(crate) fn look_up<R: Request>(
    wanted: &[Wanted<'_, R>],
    local: &Cache,
    remote: Option<&RemoteCache>,
    usable: impl Fn(&R::Entry) -> bool,
    remote_down: &mut bool,
) -> (Vec<Option<R::Entry>>, Found) {
    let mut found: Vec<Option<R::Entry>> = wanted
        .iter()
        .map(|want| match local.get(want.request) {
            Lookup::Hit(entry) if usable(&entry) => Some(entry),
            other => {
                warn_unusable(want.stem, "", other);
                None
            }
        })
        .collect();
    let mut counts = Found {
        local_hits: found.iter().flatten().count(),
        ..Found::default()
    };
    if let Some(remote) = remote {
        fetch_missing(wanted, &mut found, local, remote, &usable, &mut counts);
        *remote_down |= remote.is_down();
    }
    (found, counts)
}

/// Fills the gaps of `found` from the remote store, copying each hit into the local folder.
fn fetch_missing<R: Request>(
    wanted: &[Wanted<'_, R>],
    found: &mut [Option<R::Entry>],
    local: &Cache,
    remote: &RemoteCache,
    usable: &impl Fn(&R::Entry) -> bool,
    counts: &mut Found,
) {
    let missing: Vec<usize> = (0..wanted.len()).filter(|&i| found[i].is_none()).collect();
    let requests: Vec<&R> = missing.iter().map(|&i| wanted[i].request).collect();
    for (&i, fetched) in missing.iter().zip(remote.fetch(&requests)) {
        let Fetched::Checked(lookup, bytes) = fetched else {
            continue;
        };
        counts.bytes_down += bytes;
        match lookup {
            Lookup::Hit(entry) if usable(&entry) => {
                if let Err(error) = local.put(wanted[i].request, &entry) {
                    eprintln!(
                        "warning: cannot copy {} into the local cache: {error:#}",
                        wanted[i].stem
                    );
                }
                counts.remote_hits += 1;
                found[i] = Some(entry);
            }
            other => warn_unusable(wanted[i].stem, " in the remote cache", other),
        }
    }
}

/// Says why an entry that was there is not used; a plain miss says nothing.
fn warn_unusable<E>(stem: &str, tier: &str, lookup: Lookup<E>) {
    match lookup {
        Lookup::Hit(_) | Lookup::Miss => {}
        Lookup::Corrupt(why) => {
            eprintln!("warning: corrupt cache entry for {stem}{tier} ({why}); rebuilding it");
        }
        Lookup::Mismatch(why) => eprintln!(
            "warning: the cache entry for {stem}{tier} does not match what was asked for ({why}); \
             ignoring it and rebuilding it"
        ),
    }
}

/// Sends the entry files this build made (a key and its bytes each) to the remote store
/// (read-write mode; nothing when it is down).
pub(crate) fn upload(
    entries: &[(String, Vec<u8>)],
    remote: Option<&RemoteCache>,
    stats: &mut CacheStats,
) {
    let Some(remote) = remote else {
        return;
    };
    stats.bytes_up = remote.store(entries);
    stats.remote_down |= remote.is_down();
}

impl CacheStats {
    /// Starts the statistics of a build with the remote store it uses, if any.
    pub(crate) fn for_remote(remote: Option<&RemoteCache>) -> CacheStats {
        CacheStats {
            remote: remote.map(|r| (r.shown().to_owned(), r.mode())),
            ..CacheStats::default()
        }
    }

    /// The `"cache"` object of the JSON summary.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "local_hits": self.local_hits,
            "remote_hits": self.remote_hits,
            "misses": self.misses,
            "nvrtc_calls": self.nvrtc_calls,
            "instance_hits": self.instance_hits,
            "lowered": self.lowered,
            "bytes_down": self.bytes_down,
            "bytes_up": self.bytes_up,
            "saved_ms": self.saved_ms,
            "remote": self.remote.as_ref().map(|(url, _)| url),
            "remote_mode": self.remote.as_ref().map(|(_, mode)| mode.name()),
            "remote_available": self.remote.as_ref().map(|_| !self.remote_down),
        })
    }

    /// The summary's second line: `cache: 3 local hits, 4 remote hits, 2 misses (2 NVRTC
    /// compilations, 2 instances lowered); 1.2 MiB down, 40.0 KiB up; 3.1 s of compilation
    /// saved; remote ...`.
    pub(crate) fn to_words(&self) -> String {
        let mut text = format!(
            "cache: {} local hit(s), {} remote hit(s), {} miss(es) ({} NVRTC compilation(s), {} \
             instance(s) lowered); {} down, {} up; {:.1} s of compilation saved",
            self.local_hits,
            self.remote_hits,
            self.misses,
            self.nvrtc_calls,
            self.lowered,
            bytes_words(self.bytes_down),
            bytes_words(self.bytes_up),
            std::time::Duration::from_millis(self.saved_ms).as_secs_f64(),
        );
        match &self.remote {
            Some((url, mode)) => {
                let state = if self.remote_down {
                    ", unavailable"
                } else {
                    ""
                };
                text += &format!("; remote {url} ({}{state})", mode.name());
            }
            None => text += "; no remote",
        }
        text
    }
}

/// `512 B`, `40.0 KiB`, `1.2 MiB`.
fn bytes_words(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for next in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_words() {
        assert_eq!(bytes_words(512), "512 B");
        assert_eq!(bytes_words(40 * 1024), "40.0 KiB");
        assert_eq!(bytes_words(3 * 1024 * 1024 / 2), "1.5 MiB");
    }
}

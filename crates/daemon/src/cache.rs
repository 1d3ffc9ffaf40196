//! The build cache: compiled kernels stored under a content key, so that a build pays only for
//! kernels whose generated code, target or compiler changed since any earlier build.
//!
//! An entry is one file, `<dir>/<first two hex digits>/<key>`: a header line
//! `tilec-cache 2 <key> <sha256 of the payload>` and the payload, a JSON object with the request the
//! entry answers (tilec's version, the target, the compiler and the SHA-256 of the CUDA source:
//! what the key was made of), the CUDA source, the PTX and ptxas's report. Entries are written to a
//! temporary file in the same folder and renamed into place, so a reader sees a whole entry or
//! none, and two builds writing the same key at once both leave a whole one.
//!
//! A cache folder may be shared, by a team or by a CI machine's jobs, so an entry is used only when
//! it answers exactly what was asked: its header names the key asked for, its checksum matches, its
//! recorded request is the one asked, its CUDA source hashes to the source asked for, and it holds
//! PTX only when the request had a compiler. A truncated or edited entry is reported as corrupt, a
//! well-formed entry for something else (a planted one, or one copied to another key's name) as a
//! mismatch; both are rebuilt, never used. Entries of an older format are misses: rebuilt silently.
//!
//! Entries and the folders that hold them take their permissions from the cache folder (see
//! [`tilec_runtime::files`]): whoever may read the cache folder may read every entry in it, whatever
//! the umask of the user who wrote the entry.
//!
//! The remote tier (`remote.rs`) stores the very same bytes under the same relative path
//! ([`entry_path`]), and checks what it reads with the same [`check_entry`], so an entry read from
//! a shared store is trusted no more than one read from a shared folder.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tilec_runtime::files::{create_shared_folder, shared_file_mode, write_atomically};

const MAGIC: &str = "tilec-cache";
const FORMAT: u32 = 2;

/// What one kernel compiled to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CacheEntry {
    pub cuda: String,
    /// Absent when NVRTC was not available or not asked for.
    pub ptx: Option<String>,
    /// The ptxas lines of NVRTC's log (registers, spills), when it reported them.
    pub ptxas: Option<String>,
    /// How long making the entry took (NVRTC's compilation), in milliseconds: what a later hit
    /// saves, for the build's statistics. `None` in entries written before it was recorded.
    pub compile_ms: Option<u64>,
}

/// What a build asks the cache for: the parts of the key, kept so that an entry can be checked
/// against each of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CacheRequest {
    pub key: String,
    tilec: String,
    target: String,
    /// The compiler that makes PTX of the source (`nvrtc 12.8`), or `None` for the source alone.
    compiler: Option<String>,
    source_sha256: String,
}

/// The result of looking a key up.
#[derive(Debug)]
pub(crate) enum Lookup {
    Hit(CacheEntry),
    Miss,
    /// The entry exists but is damaged (unreadable, truncated, edited); the string says why.
    Corrupt(String),
    /// The entry is whole but answers another request than the one asked; the string says how.
    Mismatch(String),
}

/// A cache folder.
#[derive(Clone, Debug)]
pub(crate) struct Cache {
    dir: PathBuf,
}

/// The hex SHA-256 of `parts`, each length-prefixed so that no two part lists collide.
pub(crate) fn content_key(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

impl CacheRequest {
    /// The request for `cuda` built by this tilec for `target`, compiled by `compiler` (`None`:
    /// the source alone, no PTX).
    pub(crate) fn new(target: &str, compiler: Option<&str>, cuda: &str) -> CacheRequest {
        let tilec = env!("CARGO_PKG_VERSION");
        let key = content_key(&[tilec, target, compiler.unwrap_or("no nvrtc"), cuda]);
        CacheRequest {
            key,
            tilec: tilec.to_owned(),
            target: target.to_owned(),
            compiler: compiler.map(str::to_owned),
            source_sha256: sha256(cuda),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "tilec": self.tilec,
            "target": self.target,
            "compiler": self.compiler,
            "source_sha256": self.source_sha256,
        })
    }

    /// How a whole entry fails to answer this request, if it does.
    fn mismatch(&self, recorded: &Value, entry: &CacheEntry) -> Option<String> {
        let wanted = self.to_json();
        for field in ["tilec", "target", "compiler", "source_sha256"] {
            if recorded.get(field) != wanted.get(field) {
                return Some(format!(
                    "recorded {field} {} where {} was asked for",
                    recorded.get(field).unwrap_or(&Value::Null),
                    wanted[field]
                ));
            }
        }
        if sha256(&entry.cuda) != self.source_sha256 {
            return Some("its CUDA source is not the one asked for".to_owned());
        }
        if self.compiler.is_none() && entry.ptx.is_some() {
            return Some("it holds PTX, but no compiler was asked for".to_owned());
        }
        None
    }
}

impl Cache {
    /// Opens (and creates) the cache folder `dir`.
    pub(crate) fn open(dir: &Path) -> Result<Cache> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the cache folder {}", dir.display()))?;
        Ok(Cache {
            dir: dir.to_owned(),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join(entry_path(key))
    }

    /// The entry answering `request`, checked as the module's documentation describes.
    pub(crate) fn get(&self, request: &CacheRequest) -> Lookup {
        let path = self.path_of(&request.key);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(error) => {
                return Lookup::Corrupt(format!("cannot read {}: {error}", path.display()));
            }
        };
        check_entry(&bytes, request, &path.display().to_string())
    }

    /// Stores `entry` as the answer to `request`, atomically, readable by whoever may read the
    /// cache folder.
    pub(crate) fn put(&self, request: &CacheRequest, entry: &CacheEntry) -> Result<()> {
        let path = self.path_of(&request.key);
        let folder = path.parent().unwrap_or(&self.dir);
        create_shared_folder(folder, &self.dir)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        write_atomically(
            &path,
            &encode_entry(request, entry),
            shared_file_mode(&self.dir),
        )
        .with_context(|| format!("cannot store {}", path.display()))?;
        Ok(())
    }
}

/// Where the entry of `key` lives below a cache's root, locally or in a remote store:
/// `<first two hex digits>/<key>`, so that no folder holds more than a 256th of the entries.
pub(crate) fn entry_path(key: &str) -> String {
    format!("{}/{key}", key.get(..2).unwrap_or("00"))
}

/// The bytes of the entry answering `request`: the header line, then the payload it checksums.
pub(crate) fn encode_entry(request: &CacheRequest, entry: &CacheEntry) -> Vec<u8> {
    let payload = json!({
        "request": request.to_json(),
        "cuda": entry.cuda,
        "ptx": entry.ptx,
        "ptxas": entry.ptxas,
        "compile_ms": entry.compile_ms,
    })
    .to_string();
    let checksum = sha256(&payload);
    let key = &request.key;
    format!("{MAGIC} {FORMAT} {key} {checksum}\n{payload}").into_bytes()
}

/// Checks the bytes of an entry read from `place` (a path or a remote URL, for the messages)
/// against `request`, as the module's documentation describes.
pub(crate) fn check_entry(bytes: &[u8], request: &CacheRequest, place: &str) -> Lookup {
    match parse_entry(bytes, &request.key) {
        Ok(Parsed::Entry(recorded, entry)) => match request.mismatch(&recorded, &entry) {
            None => Lookup::Hit(entry),
            Some(why) => Lookup::Mismatch(format!("{place}: {why}")),
        },
        Ok(Parsed::OlderFormat) => Lookup::Miss,
        Err(why) => Lookup::Corrupt(format!("{place}: {why}")),
    }
}

/// What an entry file holds.
enum Parsed {
    /// The request it records, and the entry.
    Entry(Value, CacheEntry),
    /// An entry an older tilec wrote: not checked further, and rebuilt.
    OlderFormat,
}

/// Checks the header of an entry file against `key` and the payload's checksum, then reads it.
fn parse_entry(bytes: &[u8], key: &str) -> std::result::Result<Parsed, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let (header, payload) = text
        .split_once('\n')
        .ok_or_else(|| "no header line (truncated?)".to_owned())?;
    let fields: Vec<&str> = header.split(' ').collect();
    let [magic, format, stored_key, checksum] = fields[..] else {
        return Err(format!("unexpected header {header:?}"));
    };
    if magic != MAGIC {
        return Err("not a tilec cache entry".to_owned());
    }
    match format.parse::<u32>() {
        Ok(older) if older < FORMAT => return Ok(Parsed::OlderFormat),
        Ok(FORMAT) => {}
        Ok(_) | Err(_) => return Err(format!("unknown entry format {format:?}")),
    }
    if stored_key != key {
        return Err(format!("stored under another key ({stored_key})"));
    }
    if sha256(payload) != checksum {
        return Err("checksum mismatch (truncated or modified)".to_owned());
    }
    let value: Value =
        serde_json::from_str(payload).map_err(|error| format!("payload is not JSON: {error}"))?;
    let text_field = |name: &str| value.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    let entry = CacheEntry {
        cuda: text_field("cuda").ok_or_else(|| "no CUDA source in the payload".to_owned())?,
        ptx: text_field("ptx"),
        ptxas: text_field("ptxas"),
        compile_ms: value.get("compile_ms").and_then(Value::as_u64),
    };
    let request = value.get("request").cloned().unwrap_or(Value::Null);
    Ok(Parsed::Entry(request, entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "extern \"C\" __global__ void k() {}";

    fn entry() -> CacheEntry {
        CacheEntry {
            cuda: SOURCE.to_owned(),
            ptx: Some(".entry k".to_owned()),
            ptxas: None,
            compile_ms: Some(120),
        }
    }

    #[test]
    fn an_entry_round_trips_and_a_damaged_one_is_corrupt() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = Cache::open(dir.path()).expect("opens");
        let request = CacheRequest::new("sm_90", Some("nvrtc 12.8"), SOURCE);
        assert!(matches!(cache.get(&request), Lookup::Miss));
        cache.put(&request, &entry()).expect("stores");
        match cache.get(&request) {
            Lookup::Hit(found) => assert_eq!(found, entry()),
            other => panic!("expected a hit, got {other:?}"),
        }
        let path = cache.path_of(&request.key);
        let bytes = std::fs::read(&path).expect("entry exists");
        std::fs::write(&path, &bytes[..bytes.len() - 5]).expect("truncates");
        match cache.get(&request) {
            Lookup::Corrupt(why) => assert!(why.contains("checksum mismatch"), "{why}"),
            other => panic!("expected corruption, got {other:?}"),
        }
        std::fs::write(&path, b"").expect("empties");
        assert!(matches!(cache.get(&request), Lookup::Corrupt(_)));
        std::fs::write(&path, format!("tilec-cache 1 {} 00\n{{}}", request.key)).expect("writes");
        assert!(
            matches!(cache.get(&request), Lookup::Miss),
            "an older format"
        );
    }

    /// Whole entries stored under a request's key that answer something else: each is refused.
    #[test]
    fn an_entry_for_another_request_is_a_mismatch() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = Cache::open(dir.path()).expect("opens");
        let asked = CacheRequest::new("sm_90", None, SOURCE);
        let other_source = CacheRequest {
            key: asked.key.clone(),
            ..CacheRequest::new("sm_90", None, "// other")
        };
        let source_only = CacheEntry {
            ptx: None,
            ..entry()
        };
        let cases = [
            (&other_source, source_only.clone(), "recorded source_sha256"),
            (
                &asked,
                entry(),
                "it holds PTX, but no compiler was asked for",
            ),
            (
                &asked,
                CacheEntry {
                    cuda: "// other".to_owned(),
                    ..source_only
                },
                "its CUDA source is not the one asked for",
            ),
        ];
        for (stored_as, stored, why) in cases {
            cache.put(stored_as, &stored).expect("stores");
            match cache.get(&asked) {
                Lookup::Mismatch(found) => assert!(found.contains(why), "{found}"),
                other => panic!("expected a mismatch ({why}), got {other:?}"),
            }
        }
    }

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(content_key(&["ab", "c"]), content_key(&["a", "bc"]));
        assert_eq!(content_key(&["x"]).len(), 64);
    }
}

//! The build cache: compiled kernels stored under a content key, so that a build pays only for
//! kernels whose generated code, target or compiler changed since any earlier build, and lowers
//! only the kernel instances whose inputs changed.
//!
//! It holds two kinds of entries. A *launch entry* answers a [`CacheRequest`]: one launch's CUDA
//! source, its PTX and ptxas's report, keyed by tilec's version, the target, the compiler and the
//! SHA-256 of the CUDA source. An *instance entry* answers an [`InstanceRequest`]: what lowering
//! one kernel instance gave (the SHA-256 of each launch's CUDA and the launch's description),
//! keyed by everything the lowering reads (the fingerprint of tilec's sources, the target, the
//! pass configuration, the texts of the file and of the workspace modules it imports, the
//! kernel, the instance and its arguments). A build looks the instance entry up first and, on a
//! hit, the launch entries it names: an unchanged kernel is then neither lowered nor compiled.
//!
//! An entry is one file, `<dir>/<first two hex digits>/<key>`: a header line
//! `tilec-cache 3 <key> <sha256 of the payload>` and the payload, a JSON object with the request the
//! entry answers (what the key was made of) and what it holds. Entries are written to a
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
const FORMAT: u32 = 3;

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

/// What lowering one kernel instance gave: its launches, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InstanceEntry {
    pub launches: Vec<LoweredLaunch>,
}

/// One launch of a lowered instance: the SHA-256 of its CUDA source, which names its launch entry
/// with the target and the compiler, and its description for the build's `.json` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoweredLaunch {
    pub source_sha256: String,
    pub description: Value,
}

/// What a build asks the cache for before lowering an instance: the parts of the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InstanceRequest {
    pub key: String,
    tilec: String,
    target: String,
    inputs_sha256: String,
}

/// The result of looking a key up.
#[derive(Debug)]
pub(crate) enum Lookup<E = CacheEntry> {
    Hit(E),
    Miss,
    /// The entry exists but is damaged (unreadable, truncated, edited); the string says why.
    Corrupt(String),
    /// The entry is whole but answers another request than the one asked; the string says how.
    Mismatch(String),
}

/// A request either kind of entry answers: its key, how its entry is written, and how the bytes
/// of an entry are checked against it.
pub(crate) trait Request {
    type Entry;
    fn key(&self) -> &str;
    /// The payload of the entry answering this request, without the header.
    fn payload(&self, entry: &Self::Entry) -> Value;
    /// The entry in `payload` when it answers this request, else why not.
    fn accept(&self, payload: &Value) -> std::result::Result<Self::Entry, String>;
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

pub(crate) fn sha256(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// The recorded request fields of `payload` that differ from `wanted`'s, as a mismatch message.
fn differing_field(payload: &Value, wanted: &Value, fields: &[&str]) -> Option<String> {
    let recorded = payload.get("request").unwrap_or(&Value::Null);
    fields.iter().find_map(|&field| {
        (recorded.get(field) != wanted.get(field)).then(|| {
            format!(
                "recorded {field} {} where {} was asked for",
                recorded.get(field).unwrap_or(&Value::Null),
                wanted[field]
            )
        })
    })
}

impl CacheRequest {
    /// The request for `cuda` built by this tilec for `target`, compiled by `compiler` (`None`:
    /// the source alone, no PTX).
    pub(crate) fn new(target: &str, compiler: Option<&str>, cuda: &str) -> CacheRequest {
        CacheRequest::for_source(target, compiler, &sha256(cuda))
    }

    /// The request for the CUDA source whose SHA-256 is `source_sha256`: what an instance entry
    /// names, before the source itself is read.
    pub(crate) fn for_source(
        target: &str,
        compiler: Option<&str>,
        source_sha256: &str,
    ) -> CacheRequest {
        let tilec = env!("CARGO_PKG_VERSION");
        let key = content_key(&[tilec, target, compiler.unwrap_or("no nvrtc"), source_sha256]);
        CacheRequest {
            key,
            tilec: tilec.to_owned(),
            target: target.to_owned(),
            compiler: compiler.map(str::to_owned),
            source_sha256: source_sha256.to_owned(),
        }
    }

    pub(crate) fn source_sha256(&self) -> &str {
        &self.source_sha256
    }

    fn to_json(&self) -> Value {
        json!({
            "tilec": self.tilec,
            "target": self.target,
            "compiler": self.compiler,
            "source_sha256": self.source_sha256,
        })
    }
}

impl Request for CacheRequest {
    type Entry = CacheEntry;

    fn key(&self) -> &str {
        &self.key
    }

    fn payload(&self, entry: &CacheEntry) -> Value {
        json!({
            "request": self.to_json(),
            "cuda": entry.cuda,
            "ptx": entry.ptx,
            "ptxas": entry.ptxas,
            "compile_ms": entry.compile_ms,
        })
    }

    fn accept(&self, payload: &Value) -> std::result::Result<CacheEntry, String> {
        let text_field = |name: &str| payload.get(name).and_then(Value::as_str).map(str::to_owned);
        let entry = CacheEntry {
            cuda: text_field("cuda").ok_or_else(|| "no CUDA source in the payload".to_owned())?,
            ptx: text_field("ptx"),
            ptxas: text_field("ptxas"),
            compile_ms: payload.get("compile_ms").and_then(Value::as_u64),
        };
        let fields = ["tilec", "target", "compiler", "source_sha256"];
        if let Some(why) = differing_field(payload, &self.to_json(), &fields) {
            return Err(why);
        }
        if sha256(&entry.cuda) != self.source_sha256 {
            return Err("its CUDA source is not the one asked for".to_owned());
        }
        if self.compiler.is_none() && entry.ptx.is_some() {
            return Err("it holds PTX, but no compiler was asked for".to_owned());
        }
        Ok(entry)
    }
}

impl InstanceRequest {
    /// The request for the instance whose lowering reads `inputs` (the texts, names and values
    /// the caller lists, in a fixed order), lowered by this tilec for `target`.
    pub(crate) fn new(target: &str, inputs: &[&str]) -> InstanceRequest {
        let tilec = format!(
            "{} ({})",
            env!("CARGO_PKG_VERSION"),
            env!("TILEC_SOURCE_FINGERPRINT")
        );
        let inputs_sha256 = content_key(inputs);
        let key = content_key(&["instance", &tilec, target, &inputs_sha256]);
        InstanceRequest {
            key,
            tilec,
            target: target.to_owned(),
            inputs_sha256,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "tilec": self.tilec,
            "target": self.target,
            "inputs_sha256": self.inputs_sha256,
        })
    }
}

impl Request for InstanceRequest {
    type Entry = InstanceEntry;

    fn key(&self) -> &str {
        &self.key
    }

    fn payload(&self, entry: &InstanceEntry) -> Value {
        let launches: Vec<Value> = entry
            .launches
            .iter()
            .map(|launch| {
                json!({
                    "source_sha256": launch.source_sha256,
                    "description": launch.description,
                })
            })
            .collect();
        json!({ "request": self.to_json(), "launches": launches })
    }

    fn accept(&self, payload: &Value) -> std::result::Result<InstanceEntry, String> {
        let fields = ["tilec", "target", "inputs_sha256"];
        if let Some(why) = differing_field(payload, &self.to_json(), &fields) {
            return Err(why);
        }
        let launches = payload
            .get("launches")
            .and_then(Value::as_array)
            .filter(|launches| !launches.is_empty())
            .ok_or_else(|| "no launches in the payload".to_owned())?;
        let launches = launches
            .iter()
            .map(|launch| {
                let source_sha256 = launch
                    .get("source_sha256")
                    .and_then(Value::as_str)
                    .filter(|sha| sha.len() == 64)
                    .ok_or_else(|| "a launch without its source's SHA-256".to_owned())?;
                let description = launch
                    .get("description")
                    .filter(|description| description.is_object())
                    .ok_or_else(|| "a launch without its description".to_owned())?;
                Ok(LoweredLaunch {
                    source_sha256: source_sha256.to_owned(),
                    description: description.clone(),
                })
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        Ok(InstanceEntry { launches })
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
    pub(crate) fn get<R: Request>(&self, request: &R) -> Lookup<R::Entry> {
        let path = self.path_of(request.key());
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
    pub(crate) fn put<R: Request>(&self, request: &R, entry: &R::Entry) -> Result<()> {
        let path = self.path_of(request.key());
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
pub(crate) fn encode_entry<R: Request>(request: &R, entry: &R::Entry) -> Vec<u8> {
    let payload = request.payload(entry).to_string();
    let checksum = sha256(&payload);
    let key = request.key();
    format!("{MAGIC} {FORMAT} {key} {checksum}\n{payload}").into_bytes()
}

/// Checks the bytes of an entry read from `place` (a path or a remote URL, for the messages)
/// against `request`, as the module's documentation describes.
pub(crate) fn check_entry<R: Request>(bytes: &[u8], request: &R, place: &str) -> Lookup<R::Entry> {
    match parse_entry(bytes, request.key()) {
        Ok(Some(payload)) => match request.accept(&payload) {
            Ok(entry) => Lookup::Hit(entry),
            Err(why) => Lookup::Mismatch(format!("{place}: {why}")),
        },
        Ok(None) => Lookup::Miss,
        Err(why) => Lookup::Corrupt(format!("{place}: {why}")),
    }
}

/// Checks the header of an entry file against `key` and the payload's checksum, then reads the
/// payload; `None` for an entry an older tilec wrote, which is not checked further and is rebuilt.
fn parse_entry(bytes: &[u8], key: &str) -> std::result::Result<Option<Value>, String> {
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
        Ok(older) if older < FORMAT => return Ok(None),
        Ok(FORMAT) => {}
        Ok(_) | Err(_) => return Err(format!("unknown entry format {format:?}")),
    }
    if stored_key != key {
        return Err(format!("stored under another key ({stored_key})"));
    }
    if sha256(payload) != checksum {
        return Err("checksum mismatch (truncated or modified)".to_owned());
    }
    serde_json::from_str(payload)
        .map(Some)
        .map_err(|error| format!("payload is not JSON: {error}"))
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
        std::fs::write(&path, format!("tilec-cache 2 {} 00\n{{}}", request.key)).expect("writes");
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

    /// An instance entry round-trips; one recorded for other inputs is a mismatch, and one whose
    /// launches lack their source's hash is refused as such.
    #[test]
    fn instance_entries_are_checked_like_launch_entries() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = Cache::open(dir.path()).expect("opens");
        let request = InstanceRequest::new("sm_90", &["def k(): ...", "k", "0"]);
        let entry = InstanceEntry {
            launches: vec![LoweredLaunch {
                source_sha256: sha256(SOURCE),
                description: json!({ "function": "k", "grid": [4] }),
            }],
        };
        assert!(matches!(cache.get(&request), Lookup::Miss));
        cache.put(&request, &entry).expect("stores");
        match cache.get(&request) {
            Lookup::Hit(found) => assert_eq!(found, entry),
            other => panic!("expected a hit, got {other:?}"),
        }
        let other_inputs = InstanceRequest {
            key: request.key.clone(),
            ..InstanceRequest::new("sm_90", &["def k(): ...", "k", "1"])
        };
        cache.put(&other_inputs, &entry).expect("stores");
        match cache.get(&request) {
            Lookup::Mismatch(why) => assert!(why.contains("recorded inputs_sha256"), "{why}"),
            other => panic!("expected a mismatch, got {other:?}"),
        }
        let without_hash = InstanceEntry {
            launches: vec![LoweredLaunch {
                source_sha256: String::new(),
                ..entry.launches[0].clone()
            }],
        };
        cache.put(&request, &without_hash).expect("stores");
        match cache.get(&request) {
            Lookup::Mismatch(why) => assert!(why.contains("without its source's SHA-256"), "{why}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        // The two kinds of keys never meet, even over the same text.
        assert_ne!(
            InstanceRequest::new("sm_90", &[SOURCE]).key,
            CacheRequest::new("sm_90", None, SOURCE).key
        );
    }

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(content_key(&["ab", "c"]), content_key(&["a", "bc"]));
        assert_eq!(content_key(&["x"]).len(), 64);
    }
}

//! The build cache: compiled kernels stored under a content key, so that a build pays only for
//! kernels whose generated code, target or compiler changed since any earlier build.
//!
//! An entry is one file, `<dir>/<first two hex digits>/<key>`: a header line
//! `tilec-cache 1 <key> <sha256 of the payload>` and the payload, a JSON object with the CUDA source,
//! the PTX and ptxas's report. Entries are written to a temporary file in the same folder and renamed
//! into place, so a reader sees a whole entry or none, and two builds writing the same key at once
//! both leave a whole one. A reader checks the key and the checksum: a truncated or edited entry is
//! reported as corrupt and rebuilt, never used.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

const MAGIC: &str = "tilec-cache";
const FORMAT: u32 = 1;

/// What one kernel compiled to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    pub cuda: String,
    /// Absent when NVRTC was not available or not asked for.
    pub ptx: Option<String>,
    /// The ptxas lines of NVRTC's log (registers, spills), when it reported them.
    pub ptxas: Option<String>,
}

/// The result of looking a key up.
#[derive(Debug)]
pub enum Lookup {
    Hit(CacheEntry),
    Miss,
    /// The entry exists but cannot be trusted; the string says why.
    Corrupt(String),
}

/// A cache folder.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

/// The hex SHA-256 of `parts`, each length-prefixed so that no two part lists collide.
pub fn content_key(parts: &[&str]) -> String {
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

impl Cache {
    /// Opens (and creates) the cache folder `dir`.
    pub fn open(dir: &Path) -> Result<Cache> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the cache folder {}", dir.display()))?;
        Ok(Cache {
            dir: dir.to_owned(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join(key.get(..2).unwrap_or("00")).join(key)
    }

    pub fn get(&self, key: &str) -> Lookup {
        let path = self.path_of(key);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(error) => {
                return Lookup::Corrupt(format!("cannot read {}: {error}", path.display()));
            }
        };
        match parse_entry(&bytes, key) {
            Ok(entry) => Lookup::Hit(entry),
            Err(why) => Lookup::Corrupt(format!("{}: {why}", path.display())),
        }
    }

    /// Stores `entry` under `key`, atomically.
    pub fn put(&self, key: &str, entry: &CacheEntry) -> Result<()> {
        let path = self.path_of(key);
        let folder = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        let payload = serde_json::json!({
            "cuda": entry.cuda,
            "ptx": entry.ptx,
            "ptxas": entry.ptxas,
        })
        .to_string();
        let checksum = hex(&Sha256::digest(payload.as_bytes()));
        let mut file = tempfile::NamedTempFile::new_in(folder)
            .with_context(|| format!("cannot write into {}", folder.display()))?;
        write!(file, "{MAGIC} {FORMAT} {key} {checksum}\n{payload}")
            .and_then(|()| file.as_file().sync_all())
            .with_context(|| format!("cannot write a cache entry in {}", folder.display()))?;
        file.persist(&path)
            .with_context(|| format!("cannot store {}", path.display()))?;
        Ok(())
    }
}

/// Checks the header of an entry file against `key` and the payload's checksum, then reads it.
fn parse_entry(bytes: &[u8], key: &str) -> std::result::Result<CacheEntry, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let (header, payload) = text
        .split_once('\n')
        .ok_or_else(|| "no header line (truncated?)".to_owned())?;
    let fields: Vec<&str> = header.split(' ').collect();
    let [magic, format, stored_key, checksum] = fields[..] else {
        return Err(format!("unexpected header {header:?}"));
    };
    if magic != MAGIC || format != FORMAT.to_string() {
        return Err(format!("not a tilec cache entry of format {FORMAT}"));
    }
    if stored_key != key {
        return Err(format!("stored under another key ({stored_key})"));
    }
    if hex(&Sha256::digest(payload.as_bytes())) != checksum {
        return Err("checksum mismatch (truncated or modified)".to_owned());
    }
    let value: serde_json::Value =
        serde_json::from_str(payload).map_err(|error| format!("payload is not JSON: {error}"))?;
    let text_field = |name: &str| value.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    Ok(CacheEntry {
        cuda: text_field("cuda").ok_or_else(|| "no CUDA source in the payload".to_owned())?,
        ptx: text_field("ptx"),
        ptxas: text_field("ptxas"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> CacheEntry {
        CacheEntry {
            cuda: "extern \"C\" __global__ void k() {}".to_owned(),
            ptx: Some(".entry k".to_owned()),
            ptxas: None,
        }
    }

    #[test]
    fn an_entry_round_trips_and_a_damaged_one_is_corrupt() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = Cache::open(dir.path()).expect("opens");
        let key = content_key(&["tilec", "sm_90", "source"]);
        assert!(matches!(cache.get(&key), Lookup::Miss));
        cache.put(&key, &entry()).expect("stores");
        match cache.get(&key) {
            Lookup::Hit(found) => assert_eq!(found, entry()),
            other => panic!("expected a hit, got {other:?}"),
        }
        let path = cache.path_of(&key);
        let bytes = std::fs::read(&path).expect("entry exists");
        std::fs::write(&path, &bytes[..bytes.len() - 5]).expect("truncates");
        match cache.get(&key) {
            Lookup::Corrupt(why) => assert!(why.contains("checksum mismatch"), "{why}"),
            other => panic!("expected corruption, got {other:?}"),
        }
        std::fs::write(&path, b"").expect("empties");
        assert!(matches!(cache.get(&key), Lookup::Corrupt(_)));
    }

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(content_key(&["ab", "c"]), content_key(&["a", "bc"]));
        assert_eq!(content_key(&["x"]).len(), 64);
    }
}

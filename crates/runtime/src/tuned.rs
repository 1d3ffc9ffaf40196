//! The tuning cache: the configuration `tilec tune` measured fastest, per kernel instance and device.
//!
//! One JSON file per instance, `<cache>/tuned/<key>.json`, where the key is the SHA-256 of the
//! file's canonical path, the kernel's name and the instance's arguments as written. Inside, one
//! record per device name, so a project tuned on an H100 and on an H200 keeps both. `tilec run`
//! looks up the device it runs on; `tilec build`, which has no device, and the editor take a record
//! whose architecture is their target. Files are written to a temporary file and renamed into
//! place, so a reader sees a whole file or the previous one.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tilec_ir::{ConstValue, Target};

use crate::files::{create_shared_folder, shared_file_mode, write_atomically};

/// A tuned configuration: each tunable parameter's value.
pub type TunedConfig = Vec<(String, i64)>;

/// Which instance a record belongs to.
#[derive(Clone, Debug)]
pub struct TunedInstance<'a> {
    pub file: &'a Path,
    pub kernel: &'a str,
    /// The instance's arguments as written at its call site.
    pub args: &'a [(String, ConstValue)],
}

impl TunedInstance<'_> {
    fn identity(&self) -> (String, Value) {
        let file = std::fs::canonicalize(self.file).unwrap_or_else(|_| self.file.to_owned());
        let file = file.display().to_string();
        let args: Map<String, Value> = self
            .args
            .iter()
            .map(|(name, value)| (name.clone(), value_json(value)))
            .collect();
        let args = Value::Object(args);
        let mut hasher = Sha256::new();
        for part in ["tuned", file.as_str(), self.kernel, &args.to_string()] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        let key = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        (
            key,
            json!({"file": file, "kernel": self.kernel, "args": args}),
        )
    }
}

/// A meta argument as JSON: numbers, strings and booleans as themselves, anything else as its
/// Python-like text (only equality matters for the key).
fn value_json(value: &ConstValue) -> Value {
    match value {
        ConstValue::None => Value::Null,
        ConstValue::Bool(b) => json!(b),
        ConstValue::Int(i) => json!(i),
        ConstValue::Float(bits) => json!(f64::from_bits(*bits)),
        ConstValue::Str(text) => json!(text),
        other => json!(format!("{other:?}")),
    }
}

/// What one device measured.
#[derive(Clone, Debug, PartialEq)]
pub struct TunedRecord {
    pub device: String,
    /// `sm_80`, `sm_90`.
    pub arch: String,
    pub winner: TunedConfig,
    pub median_ms: f64,
    /// Every configuration measured, with its median.
    pub measured: Vec<(TunedConfig, f64)>,
}

/// Where a record is looked up.
#[derive(Clone, Copy, Debug)]
pub enum TunedFor<'a> {
    /// The GPU a run uses, by name.
    Device(&'a str),
    /// Any GPU of this architecture (builds and the editor).
    Target(Target),
}

#[derive(Clone, Debug)]
pub struct TunedStore {
    dir: PathBuf,
}

impl TunedStore {
    /// The tuning cache inside the build cache folder `cache` (created on the first store).
    pub fn new(cache: &Path) -> TunedStore {
        TunedStore {
            dir: cache.join("tuned"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// Adds `record` to its instance's file; returns the file's path.
    pub fn put(
        &self,
        instance: &TunedInstance<'_>,
        record: &TunedRecord,
    ) -> Result<PathBuf, String> {
        let cache = self.dir.parent().unwrap_or(&self.dir);
        create_shared_folder(&self.dir, cache)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let (key, identity) = instance.identity();
        let path = self.path_of(&key);
        let mut document = self
            .read(&key)
            .unwrap_or_else(|| json!({"identity": identity, "devices": {}}));
        let config = |config: &TunedConfig| -> Value {
            Value::Object(config.iter().map(|(n, v)| (n.clone(), json!(v))).collect())
        };
        let measured: Vec<Value> = record
            .measured
            .iter()
            .map(|(c, ms)| json!({"config": config(c), "median_ms": ms}))
            .collect();
        if let Some(devices) = document.get_mut("devices").and_then(Value::as_object_mut) {
            devices.insert(
                record.device.clone(),
                json!({
                    "arch": record.arch,
                    "winner": config(&record.winner),
                    "median_ms": record.median_ms,
                    "measured": measured,
                }),
            );
        }
        let text = serde_json::to_string_pretty(&document).map_err(|e| e.to_string())?;
        // Whoever shares the build cache shares its tuning results: they are read by every build.
        write_atomically(
            &path,
            format!("{text}\n").as_bytes(),
            shared_file_mode(cache),
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }

    fn read(&self, key: &str) -> Option<Value> {
        let text = std::fs::read_to_string(self.path_of(key)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The record of `instance` for `wanted`, if `tilec tune` stored one.
    pub fn lookup(
        &self,
        instance: &TunedInstance<'_>,
        wanted: &TunedFor<'_>,
    ) -> Option<TunedRecord> {
        let (key, _) = instance.identity();
        let document = self.read(&key)?;
        let devices = document.get("devices")?.as_object()?;
        let (device, record) = devices.iter().find(|(device, record)| match wanted {
            TunedFor::Device(name) => device.as_str() == *name,
            TunedFor::Target(target) => {
                record.get("arch").and_then(Value::as_str) == Some(target.name())
            }
        })?;
        let config = |value: &Value| -> Option<TunedConfig> {
            Some(
                value
                    .as_object()?
                    .iter()
                    .filter_map(|(name, v)| Some((name.clone(), v.as_i64()?)))
                    .collect(),
            )
        };
        Some(TunedRecord {
            device: device.clone(),
            arch: record.get("arch")?.as_str()?.to_owned(),
            winner: config(record.get("winner")?)?,
            median_ms: record.get("median_ms")?.as_f64()?,
            measured: record
                .get("measured")
                .and_then(Value::as_array)
                .map(|all| {
                    all.iter()
                        .filter_map(|m| {
                            Some((config(m.get("config")?)?, m.get("median_ms")?.as_f64()?))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_winner_is_found_by_device_and_by_architecture_only_for_its_instance() {
        let cache = tempfile::tempdir().expect("a temporary folder");
        let store = TunedStore::new(cache.path());
        let args = vec![("M".to_owned(), ConstValue::Int(1024))];
        let instance = TunedInstance {
            file: Path::new("kernels/gemm.py"),
            kernel: "matmul",
            args: &args,
        };
        let winner = vec![("block_M".to_owned(), 64), ("threads".to_owned(), 128)];
        let record = TunedRecord {
            device: "NVIDIA H200".to_owned(),
            arch: "sm_90".to_owned(),
            winner: winner.clone(),
            median_ms: 0.5,
            measured: vec![
                (winner.clone(), 0.5),
                (vec![("block_M".to_owned(), 128)], 0.7),
            ],
        };
        store.put(&instance, &record).expect("stored");
        assert_eq!(
            store.lookup(&instance, &TunedFor::Device("NVIDIA H200")),
            Some(record.clone())
        );
        assert_eq!(
            store.lookup(&instance, &TunedFor::Target(Target::Sm90)),
            Some(record)
        );
        assert_eq!(
            store.lookup(&instance, &TunedFor::Target(Target::Sm80)),
            None
        );
        assert_eq!(
            store.lookup(&instance, &TunedFor::Device("NVIDIA A100")),
            None
        );
        let other_args = vec![("M".to_owned(), ConstValue::Int(2048))];
        let other = TunedInstance {
            args: &other_args,
            ..instance
        };
        assert_eq!(store.lookup(&other, &TunedFor::Target(Target::Sm90)), None);
    }
}

//! `tilec.toml`: project settings and extra kernel instances.
//!
//! ```toml
//! [check]
//! target = "sm_90"            # or "sm_80"; the CLI's --target overrides it
//!
//! [pass_configs]             # applied to every kernel, over the kernel's own pass_configs
//! "tl.disable_tma_lower" = true
//!
//! [cache]
//! remote = "redis://127.0.0.1:6379/0"   # the build cache's second tier (`tilec build`)
//!
//! [[instance]]
//! file = "kernels/gemm.py"    # relative to the folder of this tilec.toml
//! kernel = "matmul"
//! args = { M = 4096, N = 4096, K = 4096, block_M = 128, block_N = 128, block_K = 32 }
//! ```

use tilec_ir::{ConstValue, Span, Target};

use crate::instances::ManifestInstance;

/// A parsed tilec.toml.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub target: Option<Target>,
    /// `[pass_configs]`: TileLang pass configs for every kernel (keys as `"tl.x"` strings).
    pub pass_configs: Vec<(String, ConstValue)>,
    /// `[cache] remote`: the URL of the build cache's remote tier, as written (the daemon parses
    /// it: the front end does no I/O and knows no store).
    pub cache_remote: Option<String>,
    pub instances: Vec<ManifestEntry>,
}

/// One `[[instance]]`, with the file it applies to as written (relative to the manifest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestEntry {
    pub file: String,
    pub instance: ManifestInstance,
}

/// Why a tilec.toml was rejected, with the byte range of the offending part when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    pub message: String,
    pub span: Option<Span>,
}

impl ManifestError {
    fn new(message: impl Into<String>) -> ManifestError {
        ManifestError {
            message: message.into(),
            span: None,
        }
    }
}

pub fn parse_manifest(text: &str) -> Result<Manifest, ManifestError> {
    let table: toml::Table = toml::from_str(text).map_err(|error| ManifestError {
        message: error.message().to_owned(),
        span: error
            .span()
            // A manifest past 4 GiB has offsets a `Span` cannot hold: it gets none, not a wrong one.
            .and_then(|range| {
                Some(Span::new(
                    u32::try_from(range.start).ok()?,
                    u32::try_from(range.end).ok()?,
                ))
            }),
    })?;
    let mut manifest = Manifest::default();
    for (key, value) in &table {
        match key.as_str() {
            "check" => manifest.target = read_check(value)?,
            "cache" => manifest.cache_remote = read_cache(value)?,
            "pass_configs" => {
                let Some(table) = value.as_table() else {
                    return Err(ManifestError::new(
                        "`pass_configs` must be a table of `\"tl.key\" = value`",
                    ));
                };
                for (key, value) in table {
                    manifest
                        .pass_configs
                        .push((key.clone(), const_value(value)?));
                }
            }
            "instance" => {
                let Some(entries) = value.as_array() else {
                    return Err(ManifestError::new(
                        "`instance` must be an array of tables: write `[[instance]]`",
                    ));
                };
                for entry in entries {
                    manifest.instances.push(read_instance(entry)?);
                }
            }
            other => {
                return Err(ManifestError::new(format!(
                    "unknown key `{other}` (expected `check`, `pass_configs`, `cache` or `instance`)"
                )));
            }
        }
    }
    Ok(manifest)
}

fn read_check(value: &toml::Value) -> Result<Option<Target>, ManifestError> {
    let Some(table) = value.as_table() else {
        return Err(ManifestError::new("`check` must be a table"));
    };
    match table.get("target") {
        None => Ok(None),
        Some(toml::Value::String(name)) => Target::from_name(name).map(Some).ok_or_else(|| {
            ManifestError::new(format!(
                "unknown target {name:?} (expected \"sm_80\" or \"sm_90\")"
            ))
        }),
        Some(_) => Err(ManifestError::new(
            "`check.target` must be a string such as \"sm_90\"",
        )),
    }
}

/// `[cache]`: only `remote = "URL"` so far; any other key is an error, so that a typo is not a
/// silently local-only build.
fn read_cache(value: &toml::Value) -> Result<Option<String>, ManifestError> {
    let Some(table) = value.as_table() else {
        return Err(ManifestError::new("`cache` must be a table"));
    };
    if let Some(other) = table.keys().find(|key| key.as_str() != "remote") {
        return Err(ManifestError::new(format!(
            "unknown key `cache.{other}` (expected `remote`)"
        )));
    }
    match table.get("remote") {
        None => Ok(None),
        Some(toml::Value::String(url)) => Ok(Some(url.clone())),
        Some(_) => Err(ManifestError::new(
            "`cache.remote` must be a string such as \"redis://127.0.0.1:6379/0\"",
        )),
    }
}

fn read_instance(value: &toml::Value) -> Result<ManifestEntry, ManifestError> {
    let Some(table) = value.as_table() else {
        return Err(ManifestError::new("each `[[instance]]` must be a table"));
    };
    let text = |key: &str| -> Result<String, ManifestError> {
        table
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ManifestError::new(format!("an `[[instance]]` needs `{key} = \"...\"`")))
    };
    let file = text("file")?;
    let kernel = text("kernel")?;
    let mut args = Vec::new();
    if let Some(arguments) = table.get("args") {
        let Some(arguments) = arguments.as_table() else {
            return Err(ManifestError::new(
                "`args` must be an inline table: `args = { M = 1024 }`",
            ));
        };
        for (name, value) in arguments {
            args.push((name.clone(), const_value(value)?));
        }
    }
    Ok(ManifestEntry {
        file,
        instance: ManifestInstance { kernel, args },
    })
}

fn const_value(value: &toml::Value) -> Result<ConstValue, ManifestError> {
    Ok(match value {
        toml::Value::Integer(value) => ConstValue::Int(*value),
        toml::Value::Float(value) => ConstValue::float(*value),
        toml::Value::Boolean(value) => ConstValue::Bool(*value),
        toml::Value::String(text) => ConstValue::Str(text.clone()),
        toml::Value::Array(items) => {
            ConstValue::List(items.iter().map(const_value).collect::<Result<_, _>>()?)
        }
        other => {
            return Err(ManifestError::new(format!(
                "unsupported argument value `{other}`"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::parse_manifest;
    use tilec_ir::{ConstValue, Target};

    #[test]
    fn reads_target_and_instances() {
        let manifest = parse_manifest(
            "[check]\ntarget = \"sm_80\"\n\n[[instance]]\nfile = \"gemm.py\"\nkernel = \"matmul\"\nargs = { M = 64, dtype = \"float16\" }\n",
        );
        let Ok(manifest) = manifest else {
            panic!("{manifest:?}")
        };
        assert_eq!(manifest.target, Some(Target::Sm80));
        assert!(manifest.pass_configs.is_empty());
        assert_eq!(manifest.instances.len(), 1);
        assert_eq!(manifest.instances[0].file, "gemm.py");
        assert_eq!(
            manifest.instances[0].instance.args[0],
            ("M".to_owned(), ConstValue::Int(64))
        );
    }

    #[test]
    fn reads_pass_configs() {
        let manifest = parse_manifest("[pass_configs]\n\"tl.disable_tma_lower\" = true\n");
        let Ok(manifest) = manifest else {
            panic!("{manifest:?}")
        };
        assert_eq!(
            manifest.pass_configs,
            vec![("tl.disable_tma_lower".to_owned(), ConstValue::Bool(true))]
        );
    }

    #[test]
    fn reads_the_remote_cache() {
        let manifest = parse_manifest("[cache]\nremote = \"redis://127.0.0.1:6379/0\"\n");
        assert_eq!(
            manifest.map(|m| m.cache_remote),
            Ok(Some("redis://127.0.0.1:6379/0".to_owned()))
        );
        let typo = parse_manifest("[cache]\nremtoe = \"s3://b\"\n").err();
        assert_eq!(
            typo.map(|e| e.message),
            Some("unknown key `cache.remtoe` (expected `remote`)".to_owned())
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let error = parse_manifest("[[instance]]\nfile = \"a.py\"\n").err();
        assert_eq!(
            error.map(|e| e.message),
            Some("an `[[instance]]` needs `kernel = \"...\"`".to_owned())
        );
        assert!(
            parse_manifest("[check\n")
                .err()
                .and_then(|e| e.span)
                .is_some()
        );
    }
}

//! `tilec tune --gpus`: which of the host's GPUs measure the candidates.
//!
//! The list is read by clap ([`parse_gpu_list`]) and then checked against the GPUs the driver lists
//! ([`choose_gpus`]), both pure functions so that they are tested without a GPU. Every GPU chosen
//! must be the same model (name and compute capability) as the first: the candidates are compiled
//! once for one architecture, the winner is stored under one device name, and the figures of a
//! faster model would not be comparable even as ratios. An explicit list with another model is an
//! error; without `--gpus`, the GPUs of another model than GPU 0 are left out with a note.

use tilec_runtime::GpuInfo;

/// The GPU ordinals `--gpus` names, in the order given (the first computes the reference output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GpuList(pub Vec<usize>);

/// Reads `--gpus`: comma-separated GPU numbers (`0,1`), at least one, none twice. Whether the host
/// has them is checked later, by [`choose_gpus`].
pub(crate) fn parse_gpu_list(text: &str) -> Result<GpuList, String> {
    let mut ordinals: Vec<usize> = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(
                "an empty GPU number: name GPUs by number, separated by commas (--gpus 0,1)"
                    .to_owned(),
            );
        }
        let ordinal: usize = item.parse().map_err(|_| {
            format!("`{item}` is not a GPU number (GPUs are numbered from 0, as in --gpus 0,1)")
        })?;
        if ordinals.contains(&ordinal) {
            return Err(format!("GPU {ordinal} is named twice"));
        }
        ordinals.push(ordinal);
    }
    Ok(GpuList(ordinals))
}

/// The GPUs to measure on, and notes about the ones left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GpuChoice {
    pub ordinals: Vec<usize>,
    /// One sentence per GPU of the host left out, for stderr.
    pub notes: Vec<String>,
}

/// Checks `requested` (`None`: every GPU) against the GPUs `present`: each must exist, appear
/// once and be the same model as the first chosen. Without a list, the GPUs of another model than
/// the host's first are left out with a note instead.
pub(crate) fn choose_gpus(
    requested: Option<&[usize]>,
    present: &[GpuInfo],
) -> Result<GpuChoice, String> {
    let Some(requested) = requested else {
        return Ok(every_gpu_like_the_first(present));
    };
    if requested.is_empty() {
        return Err("--gpus names no GPU".to_owned());
    }
    let mut chosen: Vec<&GpuInfo> = Vec::with_capacity(requested.len());
    for &ordinal in requested {
        let Some(gpu) = present.iter().find(|gpu| gpu.ordinal == ordinal) else {
            return Err(format!("no GPU {ordinal}: {}", describe_host(present)));
        };
        if chosen.iter().any(|seen| seen.ordinal == ordinal) {
            return Err(format!("GPU {ordinal} is named twice"));
        }
        if let Some(first) = chosen.first()
            && !same_model(first, gpu)
        {
            return Err(format!(
                "{} is another model than {}: their times are not comparable, and the winner is \
                 stored per model; name GPUs of one model with --gpus",
                describe_gpu(gpu),
                describe_gpu(first)
            ));
        }
        chosen.push(gpu);
    }
    Ok(GpuChoice {
        ordinals: requested.to_vec(),
        notes: Vec::new(),
    })
}

/// Every GPU of the host's first model, with a note for each other one.
fn every_gpu_like_the_first(present: &[GpuInfo]) -> GpuChoice {
    let mut choice = GpuChoice {
        ordinals: Vec::new(),
        notes: Vec::new(),
    };
    let Some(first) = present.first() else {
        return choice;
    };
    for gpu in present {
        if same_model(first, gpu) {
            choice.ordinals.push(gpu.ordinal);
        } else {
            choice.notes.push(format!(
                "leaving out {}: another model than {}, so their times would not compare \
                 (--gpus {} measures on it alone)",
                describe_gpu(gpu),
                describe_gpu(first),
                gpu.ordinal
            ));
        }
    }
    choice
}

/// Whether times measured on `a` and `b` compare: the same name and compute capability.
fn same_model(a: &GpuInfo, b: &GpuInfo) -> bool {
    a.name == b.name && a.compute_capability == b.compute_capability
}

/// `GPU 1 (NVIDIA H100 80GB HBM3, compute capability 9.0)`.
fn describe_gpu(gpu: &GpuInfo) -> String {
    let (major, minor) = gpu.compute_capability;
    format!(
        "GPU {} ({}, compute capability {major}.{minor})",
        gpu.ordinal, gpu.name
    )
}

/// `this host has 2 (0: NVIDIA H100 80GB HBM3, 1: NVIDIA H100 80GB HBM3)`.
fn describe_host(present: &[GpuInfo]) -> String {
    let gpus: Vec<String> = present
        .iter()
        .map(|gpu| format!("{}: {}", gpu.ordinal, gpu.name))
        .collect();
    format!("this host has {} ({})", present.len(), gpus.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(ordinal: usize, name: &str, major: i32) -> GpuInfo {
        GpuInfo {
            ordinal,
            name: name.to_owned(),
            compute_capability: (major, 0),
        }
    }

    const H100: &str = "NVIDIA H100 80GB HBM3";

    fn two_h100s() -> Vec<GpuInfo> {
        vec![gpu(0, H100, 9), gpu(1, H100, 9)]
    }

    #[test]
    fn a_list_is_numbers_separated_by_commas() {
        assert_eq!(parse_gpu_list("0,1"), Ok(GpuList(vec![0, 1])));
        assert_eq!(parse_gpu_list(" 1 , 0 "), Ok(GpuList(vec![1, 0])));
        assert_eq!(parse_gpu_list("3"), Ok(GpuList(vec![3])));
    }

    #[test]
    fn empty_lists_words_negative_numbers_and_repeats_are_refused() {
        let refused = |text: &str| parse_gpu_list(text).expect_err(text);
        assert!(refused("").contains("an empty GPU number"));
        assert!(refused("0,,1").contains("an empty GPU number"));
        assert!(refused("0,").contains("an empty GPU number"));
        assert!(refused("gpu0").contains("`gpu0` is not a GPU number"));
        assert!(refused("-1").contains("`-1` is not a GPU number"));
        assert_eq!(refused("0,1,0"), "GPU 0 is named twice");
    }

    #[test]
    fn without_a_list_every_gpu_measures() {
        let choice = choose_gpus(None, &two_h100s()).expect("both GPUs");
        assert_eq!(choice.ordinals, vec![0, 1]);
        assert!(choice.notes.is_empty());
    }

    #[test]
    fn a_list_is_kept_in_its_order() {
        let choice = choose_gpus(Some(&[1, 0]), &two_h100s()).expect("both GPUs");
        assert_eq!(choice.ordinals, vec![1, 0]);
        let choice = choose_gpus(Some(&[1]), &two_h100s()).expect("GPU 1");
        assert_eq!(choice.ordinals, vec![1]);
    }

    #[test]
    fn a_gpu_the_host_lacks_is_an_error_that_lists_the_present_ones() {
        let error = choose_gpus(Some(&[0, 3]), &two_h100s()).expect_err("no GPU 3");
        assert_eq!(
            error,
            format!("no GPU 3: this host has 2 (0: {H100}, 1: {H100})")
        );
    }

    #[test]
    fn repeats_and_empty_lists_are_errors_here_too() {
        let twice = choose_gpus(Some(&[1, 1]), &two_h100s()).expect_err("twice");
        assert_eq!(twice, "GPU 1 is named twice");
        let empty = choose_gpus(Some(&[]), &two_h100s()).expect_err("empty");
        assert_eq!(empty, "--gpus names no GPU");
    }

    #[test]
    fn another_model_is_refused_when_named_and_left_out_otherwise() {
        let mixed = vec![
            gpu(0, H100, 9),
            gpu(1, "NVIDIA A100-SXM4-80GB", 8),
            gpu(2, H100, 9),
        ];
        let error = choose_gpus(Some(&[0, 1]), &mixed).expect_err("another model");
        assert!(
            error.starts_with(
                "GPU 1 (NVIDIA A100-SXM4-80GB, compute capability 8.0) is another model than \
                 GPU 0 (NVIDIA H100 80GB HBM3, compute capability 9.0)"
            ),
            "{error}"
        );
        let choice = choose_gpus(None, &mixed).expect("the H100s");
        assert_eq!(choice.ordinals, vec![0, 2]);
        assert_eq!(choice.notes.len(), 1);
        assert!(
            choice.notes[0].starts_with("leaving out GPU 1"),
            "{choice:?}"
        );
        let alone = choose_gpus(Some(&[1]), &mixed).expect("the A100 alone");
        assert_eq!(alone.ordinals, vec![1]);
    }

    #[test]
    fn the_same_name_with_another_compute_capability_is_another_model() {
        let odd = vec![gpu(0, H100, 9), gpu(1, H100, 8)];
        assert!(choose_gpus(Some(&[0, 1]), &odd).is_err());
        assert_eq!(choose_gpus(None, &odd).expect("GPU 0").ordinals, vec![0]);
    }
}

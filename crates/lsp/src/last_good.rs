//! The last good inlay hints of each open document. While a kernel is being typed into, its
//! statement is often not valid Python (every keystroke of `y = T.exp(x[i, j]`), or valid but not
//! yet evaluable (`y` alone names nothing), and the kernel then has no analysis or half of one:
//! without this its hints would vanish and come back at each keystroke. Instead, a kernel (matched
//! by name) that is not fully analysed now shows the hints it showed last, moved through the edits
//! since; a hint in text that changed is dropped, since nothing says where it would go. Such hints
//! say so in their tooltip.
//!
//! A kernel keeps its hints this way while the file has a syntax error, or while the kernel is
//! still one of the file's kernels: a renamed or deleted kernel's hints go.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tilec_ide::InlayHint;
use tower_lsp_server::ls_types::Uri;

/// The hints a document showed last, in its text of then; `stale` marks those that were already
/// kept from an earlier analysis.
#[derive(Clone, Debug, Default)]
pub(crate) struct LastGood {
    text: Arc<str>,
    hints: Vec<Shown>,
}

/// A hint as shown: from the current analysis, or kept from an earlier one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shown {
    pub hint: InlayHint,
    pub stale: bool,
}

/// The last hints of every open document, shared by the read jobs.
pub(crate) type LastGoodHints = Arc<Mutex<HashMap<Uri, LastGood>>>;

/// The current state of a document, as far as keeping hints goes.
pub(crate) struct Now<'a> {
    pub text: &'a str,
    pub has_syntax_error: bool,
    /// The names of the kernels the file has now.
    pub kernels: HashSet<String>,
    /// Those of them whose shown instance was evaluated to the end: their hints are complete.
    pub analysed: HashSet<String>,
    pub hints: Vec<InlayHint>,
}

/// The hints to show for a document now. Those of fully analysed kernels, and those kept, are
/// remembered for its next state; the partial hints of a kernel never analysed in full are shown
/// but not kept, since they are no better than what the next analysis will give.
pub(crate) fn hints_to_show(store: &LastGoodHints, uri: &Uri, now: Now<'_>) -> Vec<Shown> {
    let mut store = crate::host::lock(store);
    let shown = match store.get(uri) {
        Some(last) => keep_missing_kernels(last, &now),
        None => fresh(now.hints.clone()),
    };
    let remembered = shown
        .iter()
        .filter(|shown| shown.stale || now.analysed.contains(&shown.hint.kernel))
        .cloned()
        .collect();
    store.insert(
        uri.clone(),
        LastGood {
            text: Arc::from(now.text),
            hints: remembered,
        },
    );
    shown
}

fn fresh(hints: Vec<InlayHint>) -> Vec<Shown> {
    hints
        .into_iter()
        .map(|hint| Shown { hint, stale: false })
        .collect()
}

/// The current hints of the kernels analysed now, and for each other kernel those `last` showed
/// for it, moved into the current text (or its current hints where `last` has none).
fn keep_missing_kernels(last: &LastGood, now: &Now<'_>) -> Vec<Shown> {
    let remembered: HashSet<&str> = last
        .hints
        .iter()
        .map(|shown| shown.hint.kernel.as_str())
        .collect();
    let keeps = |kernel: &str| {
        remembered.contains(kernel)
            && !now.analysed.contains(kernel)
            && (now.has_syntax_error || now.kernels.contains(kernel))
    };
    let edit = Edit::between(&last.text, now.text);
    let kept = last
        .hints
        .iter()
        .filter(|shown| keeps(&shown.hint.kernel))
        .filter_map(|shown| {
            let offset = edit.moved(shown.hint.offset)?;
            let hint = InlayHint {
                offset,
                ..shown.hint.clone()
            };
            Some(Shown { hint, stale: true })
        });
    let current = now
        .hints
        .iter()
        .filter(|hint| !keeps(&hint.kernel))
        .cloned()
        .collect();
    let mut shown = fresh(current);
    shown.extend(kept);
    shown.sort_by_key(|shown| shown.hint.offset);
    shown
}

/// One edit that turns an old text into a new one: the bytes both share at the start and at the
/// end. A series of keystrokes in one place is one such edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Edit {
    /// Bytes shared at the start.
    prefix: usize,
    /// Where the shared end starts in the old text.
    old_suffix_start: usize,
    /// Where the shared end starts in the new text.
    new_suffix_start: usize,
}

impl Edit {
    fn between(old: &str, new: &str) -> Edit {
        let prefix = old
            .bytes()
            .zip(new.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let room = old.len().min(new.len()) - prefix;
        let suffix = old
            .bytes()
            .rev()
            .zip(new.bytes().rev())
            .take(room)
            .take_while(|(a, b)| a == b)
            .count();
        Edit {
            prefix,
            old_suffix_start: old.len() - suffix,
            new_suffix_start: new.len() - suffix,
        }
    }

    /// Where an offset of the old text is in the new one: the same before the edit, shifted by
    /// the growth of the text after it, nowhere inside the text it replaced.
    fn moved(&self, offset: u32) -> Option<u32> {
        let at = offset as usize;
        if at < self.prefix {
            Some(offset)
        } else if at >= self.old_suffix_start {
            // In the shared end, so at the same distance from its start in both texts.
            u32::try_from(at - self.old_suffix_start + self.new_suffix_start).ok()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::{
        Edit, InlayHint, LastGood, LastGoodHints, Now, Shown, hints_to_show, keep_missing_kernels,
    };

    fn hint(offset: u32, kernel: &str) -> InlayHint {
        InlayHint {
            offset,
            label: format!("{kernel}@{offset}"),
            tooltip: String::new(),
            kernel: kernel.to_owned(),
        }
    }

    fn last(text: &str, hints: Vec<InlayHint>) -> LastGood {
        LastGood {
            text: text.into(),
            hints: hints
                .into_iter()
                .map(|hint| Shown { hint, stale: false })
                .collect(),
        }
    }

    fn labels(shown: &[Shown]) -> Vec<(u32, &str, bool)> {
        shown
            .iter()
            .map(|shown| (shown.hint.offset, shown.hint.label.as_str(), shown.stale))
            .collect()
    }

    #[test]
    fn offsets_move_with_an_insertion_and_vanish_in_a_replacement() {
        let typed = Edit::between("ab\ncd\n", "ab\nxy(\ncd\n");
        assert_eq!(typed.moved(2), Some(2), "before the insertion");
        assert_eq!(
            typed.moved(3),
            Some(7),
            "at the insertion: after the typed text"
        );
        assert_eq!(typed.moved(5), Some(9));
        let replaced = Edit::between("ab\ncd\nef", "ab\nXY\nef");
        assert_eq!(replaced.moved(4), None, "inside the replaced text");
        assert_eq!(replaced.moved(6), Some(6));
    }

    #[test]
    fn a_kernel_without_hints_keeps_its_last_ones_while_the_file_has_a_syntax_error() {
        let before = last(
            "def a:\n  x\ndef b:\n  y\n",
            vec![hint(10, "a"), hint(21, "b")],
        );
        // `b` is typed into and has no analysis; `a` has its own hints now.
        let now = Now {
            text: "def a:\n  x\ndef b:\n  y(\n",
            has_syntax_error: true,
            kernels: HashSet::from(["a".to_owned()]),
            analysed: HashSet::from(["a".to_owned()]),
            hints: vec![hint(9, "a")],
        };
        let shown = keep_missing_kernels(&before, &now);
        assert_eq!(labels(&shown), vec![(9, "a@9", false), (22, "b@21", true)]);
    }

    #[test]
    fn a_renamed_kernel_does_not_keep_its_hints_without_a_syntax_error() {
        let before = last("def b:\n  y\n", vec![hint(10, "b")]);
        let now = Now {
            text: "def c:\n  y\n",
            has_syntax_error: false,
            kernels: HashSet::from(["c".to_owned()]),
            analysed: HashSet::from(["c".to_owned()]),
            hints: vec![hint(10, "c")],
        };
        assert_eq!(
            labels(&keep_missing_kernels(&before, &now)),
            vec![(10, "c@10", false)]
        );
        // Still named `b` but half analysed (no syntax error, a name not defined yet): it keeps
        // its last hints instead of the half it has now.
        let now = Now {
            text: "def b:\n  y\n  z\n",
            has_syntax_error: false,
            kernels: HashSet::from(["b".to_owned()]),
            analysed: HashSet::new(),
            hints: vec![hint(3, "b")],
        };
        assert_eq!(
            labels(&keep_missing_kernels(&before, &now)),
            vec![(10, "b@10", true)]
        );
    }

    #[test]
    fn a_kernel_never_analysed_in_full_shows_its_partial_hints_as_they_are() {
        let store = LastGoodHints::default();
        let uri: tower_lsp_server::ls_types::Uri = "file:///k.py".parse().expect("uri");
        for text in ["def b:\n  y\n", "def b:\n  y\n\n"] {
            let now = Now {
                text,
                has_syntax_error: false,
                kernels: HashSet::from(["b".to_owned()]),
                analysed: HashSet::new(),
                hints: vec![hint(10, "b")],
            };
            assert_eq!(
                labels(&hints_to_show(&store, &uri, now)),
                vec![(10, "b@10", false)]
            );
        }
    }
}

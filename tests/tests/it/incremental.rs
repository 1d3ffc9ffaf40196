//! Incremental behaviour on `tests/fixtures/kernels/pointwise_family.py` (five kernels, written for
//! these tests and kept in the repository, so they run in every clone), observed through salsa's own
//! `WillExecute` events: editing one kernel re-runs the world and checks of that kernel's instance
//! only, a comment-only edit re-runs no world and no check at all, and moving a kernel down the file
//! leaves its world equal and memoized (positions live in their own query).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use salsa::Setter;
use salsa::plumbing::AsId;
use tilec_db::{Executed, RootDatabase, SourceFile};
use tilec_ir::World;
use tilec_tests::{describe_all, fixture_path};

const FILE: &str = "kernels/pointwise_family.py";

/// The relu kernel exactly as the fixture writes it, decorator to `return main` (and the two blank
/// lines that follow it), so that it can be cut out and pasted elsewhere.
const RELU_DEF: &str = r#"@tilelang.jit(out_idx=[1])
def relu(N, block, threads=128, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = T.max(X[bx * block + i], 0)

    return main


"#;

/// A database that records executions, with the fixture loaded and every query a client asks
/// for already computed, and the log drained: what runs next is what the edit caused.
struct Session {
    db: RootDatabase,
    file: SourceFile,
    text: String,
}

impl Session {
    fn open() -> Session {
        let path = fixture_path(FILE);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
        let db = RootDatabase::with_event_log();
        let file = tilec_tests::source_file(&db, path, text.clone());
        let session = Session { db, file, text };
        session.compute();
        let first = session.db.take_executed();
        // Sanity check of the instrument itself: a first computation runs every world. Without it
        // the "did not run" assertions below would pass vacuously on a silent event log.
        assert_eq!(
            first
                .iter()
                .filter(|executed| executed.query == "kernel_world")
                .count(),
            5,
            "the first computation builds the five worlds:\n{}",
            session.log(&first)
        );
        session
    }

    /// What the editor and `tilec check` ask for: the file's diagnostics, which pull every
    /// instance's positions and checks (and so its world).
    fn compute(&self) {
        let diagnostics = tilec_db::file_diagnostics(&self.db, self.file);
        assert!(
            diagnostics.is_empty(),
            "the fixture has no diagnostics:\n{}",
            describe_all(&self.db, self.file, diagnostics)
        );
        for &instance in tilec_db::instances(&self.db, self.file) {
            let _world = tilec_db::kernel_world(&self.db, instance);
        }
    }

    fn edit(&mut self, new_text: String) {
        assert_ne!(self.text, new_text, "the edit changes the text");
        self.text = new_text.clone();
        self.file.set_text(&mut self.db).to(new_text);
    }

    /// Kernel name → salsa id of its (only) instance.
    fn instance_ids(&self) -> BTreeMap<String, salsa::Id> {
        tilec_db::instances(&self.db, self.file)
            .iter()
            .map(|instance| {
                (
                    instance.kernel(&self.db).name(&self.db).clone(),
                    instance.as_id(),
                )
            })
            .collect()
    }

    fn world(&self, kernel: &str) -> Arc<World> {
        let instance = tilec_db::instances(&self.db, self.file)
            .iter()
            .copied()
            .find(|instance| instance.kernel(&self.db).name(&self.db) == kernel)
            .unwrap_or_else(|| panic!("an instance of `{kernel}`"));
        Arc::clone(tilec_db::kernel_world(&self.db, instance))
    }

    /// The log as text, with instance keys named by their kernel where known.
    fn log(&self, log: &[Executed]) -> String {
        let names: BTreeMap<salsa::Id, String> = self
            .instance_ids()
            .into_iter()
            .map(|(kernel, id)| (id, format!("instance of {kernel}")))
            .collect();
        let mut out = String::new();
        for executed in log {
            let key = names
                .get(&executed.key)
                .cloned()
                .unwrap_or_else(|| format!("{:?}", executed.key));
            let _ = writeln!(out, "    {} ({key})", executed.query);
        }
        if out.is_empty() {
            out.push_str("    (nothing executed)\n");
        }
        out
    }
}

/// The keys with which `query` executed.
fn keys(log: &[Executed], query: &str) -> Vec<salsa::Id> {
    log.iter()
        .filter(|executed| executed.query == query)
        .map(|executed| executed.key)
        .collect()
}

/// Editing the body of `scale` rebuilds the world and re-runs the checks of `scale`'s instance, and
/// of no other instance: the other kernels' sources are equal, so salsa cuts off at them.
#[test]
fn editing_one_kernel_reruns_only_its_world_and_checks() {
    let mut session = Session::open();
    let ids = session.instance_ids();
    assert_eq!(ids.len(), 5, "five kernels, one instance each: {ids:?}");

    let before = "Y[bx * block + i] = X[bx * block + i] * alpha\n";
    assert_eq!(
        session.text.matches(before).count(),
        1,
        "the store of `scale` appears once in the fixture"
    );
    session.edit(session.text.replace(
        before,
        "Y[bx * block + i] = X[bx * block + i] * alpha * 2.0\n",
    ));
    session.compute();
    let log = session.db.take_executed();
    let listing = session.log(&log);

    assert_eq!(
        session.instance_ids(),
        ids,
        "instance ids are stable across the edit"
    );
    let scale = ids["scale"];
    assert_eq!(
        keys(&log, "kernel_world"),
        [scale],
        "kernel_world re-runs for `scale` only:\n{listing}"
    );
    assert_eq!(
        keys(&log, "instance_checks"),
        [scale],
        "instance_checks re-run for `scale` only:\n{listing}"
    );
    let world = session.world("scale").pretty();
    assert!(
        world.contains("* 2.0"),
        "the rebuilt world has the edit:\n{world}"
    );
}

/// Comments are not part of a kernel's normal form or of the module context: adding one inside a
/// kernel and one at module level rebuilds no world and re-runs no check.
#[test]
fn comment_only_edit_reruns_no_world_and_no_check() {
    let mut session = Session::open();
    let inside =
        "            for i in T.Parallel(block):\n                Y[bx * block + i] = T.max(";
    assert_eq!(
        session.text.matches(inside).count(),
        1,
        "relu's loop appears once in the fixture"
    );
    let anchor = "import tilelang.language as T\n";
    assert_eq!(
        session.text.matches(anchor).count(),
        1,
        "the import appears once in the fixture"
    );
    let edited = session
        .text
        .replace(
            inside,
            &inside.replacen("\n", "\n                # clamp negatives to zero\n", 1),
        )
        .replace(
            anchor,
            &format!("{anchor}\n# Module-level comment: nothing here reaches a kernel.\n"),
        );
    session.edit(edited);
    session.compute();
    let log = session.db.take_executed();
    let listing = session.log(&log);

    assert_eq!(
        keys(&log, "kernel_world"),
        [],
        "no world is rebuilt after a comment-only edit:\n{listing}"
    );
    assert_eq!(
        keys(&log, "instance_checks"),
        [],
        "no check re-runs after a comment-only edit:\n{listing}"
    );
    // Control: the edit did reach the database (positions moved, so they were recomputed).
    assert!(
        !keys(&log, "parse").is_empty(),
        "the edited file was parsed again:\n{listing}"
    );
}

/// Moving `relu` below the other kernels changes where it is written and nothing else: its world is
/// equal by value and is not rebuilt. Two moves are checked: below the last kernel (the file stays
/// a runnable program) and to the very end of the file.
#[test]
fn moving_a_kernel_keeps_its_world_memoized() {
    let mut session = Session::open();
    let relu = session.instance_ids()["relu"];
    let world_before = session.world("relu");
    assert_eq!(
        session.text.matches(RELU_DEF).count(),
        1,
        "relu's definition appears verbatim in the fixture"
    );
    let without = session.text.replacen(RELU_DEF, "", 1);

    let driver = "def main():\n";
    assert_eq!(
        without.matches(driver).count(),
        1,
        "the driver function appears once"
    );
    let below_kernels = without.replacen(driver, &format!("{RELU_DEF}{driver}"), 1);
    let end_of_file = format!("{without}\n\n{}", RELU_DEF.trim_end());

    for (place, moved) in [
        ("below the last kernel", below_kernels),
        ("at the end of the file", end_of_file),
    ] {
        session.edit(moved);
        session.compute();
        let log = session.db.take_executed();
        let listing = session.log(&log);

        assert_eq!(
            session.instance_ids()["relu"],
            relu,
            "relu's instance keeps its id when moved {place}"
        );
        let world_after = session.world("relu");
        assert_eq!(
            *world_after, *world_before,
            "relu's world is equal when moved {place}"
        );
        assert!(
            !keys(&log, "kernel_world").contains(&relu),
            "kernel_world does not re-run for relu when moved {place}:\n{listing}"
        );
        assert!(
            !keys(&log, "instance_checks").contains(&relu),
            "instance_checks do not re-run for relu when moved {place}:\n{listing}"
        );
        // Control: the spans of relu did move, and the query that owns them noticed.
        assert!(
            keys(&log, "kernel_positions").contains(&relu),
            "kernel_positions re-runs for relu when moved {place}:\n{listing}"
        );
    }
}

//! The threading model. One thread (the *host*) owns the salsa database and is the only one that
//! changes it: it applies opened, changed and closed documents in the order they arrive, dropping
//! a change whose version is not newer than the document's. Everything that reads runs on a small
//! pool of worker threads, each job on a *snapshot* (a clone of the database plus the document
//! table). Applying an edit cancels the snapshots still running (salsa unwinds them with
//! `Cancelled` at their next query); a cancelled request is answered with `ContentModified`.
//! Cancelled diagnostics of the edited document are superseded by those of its newer version;
//! those of any other document are computed again on the new revision ([`Task::Reanalyse`]), or
//! opening one document while another is analysed would leave the other without diagnostics.
//!
//! Async handlers never touch the database: they send a [`Task`] and await the answer. Salsa's
//! setters block until every snapshot is dropped, which must never happen on the async runtime.
//!
//! One document's analysis must not hold up another's: each changed document is analysed by its
//! own job, and the pool starts another worker when none is idle, so that a document whose
//! analysis takes long (a pathological module) occupies one thread, not the queue. Edits that
//! arrive together (an editor opening its documents at start) are applied as one batch, so that
//! analyses start only once they are all in: a setter waits for every running analysis to
//! notice its cancellation. The long computations inside a query (the evaluator, layout
//! inference, lowering) ask for it between steps, and the evaluator's work is bounded, so that
//! wait is short.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use salsa::Setter;
use tilec_db::{RootDatabase, Settings, SourceFile};
use tilec_ir::Target;
use tower_lsp_server::ls_types::Uri;

/// The most worker threads the pool starts when every one is busy; past it, jobs queue.
const MAX_WORKERS: usize = 16;

/// How long the host waits after an edit for another one to join its batch.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

/// An open document as the host knows it.
#[derive(Clone, Debug)]
pub(crate) struct Document {
    pub file: SourceFile,
    pub version: i32,
    pub path: PathBuf,
}

/// What a read job sees: the database as of one revision and the documents open in it.
pub(crate) struct Snapshot {
    pub db: RootDatabase,
    pub documents: Arc<HashMap<Uri, Document>>,
    pub target: Target,
}

impl Snapshot {
    pub(crate) fn document(&self, uri: &Uri) -> Option<&Document> {
        self.documents.get(uri)
    }
}

/// A job that reads a snapshot on a worker thread.
pub(crate) type ReadJob = Box<dyn FnOnce(Snapshot) + Send>;

/// What the async side asks of the host.
pub(crate) enum Task {
    Open {
        uri: Uri,
        path: PathBuf,
        version: i32,
        text: String,
        manifest: Vec<tilec_frontend::ManifestInstance>,
    },
    Change {
        uri: Uri,
        version: i32,
        text: String,
    },
    Close {
        uri: Uri,
    },
    /// Runs on a worker with a snapshot taken after every task sent before it.
    Read(ReadJob),
    /// Analyses an open document again, unchanged: its analysis was cancelled by an edit of
    /// another document, and nothing else would publish its diagnostics.
    Reanalyse(Uri),
    /// Sets the target (from the client's initialization options).
    Target(Target),
}

/// Runs on a worker after each batch of edits, with a snapshot, for each document that changed.
pub(crate) type OnChange = Arc<dyn Fn(Snapshot, Uri) -> Analysis + Send + Sync>;

/// How the analysis of a changed document ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Analysis {
    /// Its diagnostics were published, or will be by a newer version's analysis.
    Finished,
    /// An edit of another document cancelled it: it must run again on the new revision.
    Interrupted,
}

/// The latest version of every open document, shared with the publisher so that diagnostics of
/// an older version are never sent.
pub(crate) type Versions = Arc<Mutex<HashMap<Uri, i32>>>;

/// Starts the host thread and its workers; returns the channel tasks go in.
///
/// The host keeps a sender of its own to requeue interrupted analyses, so its thread lives as long
/// as the process.
pub(crate) fn start(workers: usize, versions: Versions, on_change: OnChange) -> mpsc::Sender<Task> {
    let (tasks, inbox) = mpsc::channel::<Task>();
    let pool = Pool::start(workers);
    let requeue = tasks.clone();
    let spawned = std::thread::Builder::new()
        .name("tilec-host".to_owned())
        .spawn(move || Host::new(pool, versions, on_change, requeue).run(&inbox));
    if let Err(error) = spawned {
        tracing::error!("cannot start the analysis thread: {error}");
    }
    tasks
}

struct Host {
    db: RootDatabase,
    documents: Arc<HashMap<Uri, Document>>,
    /// Workspace files that open documents import, read from disk (see `follow_imports`).
    imported: HashMap<PathBuf, SourceFile>,
    /// The module names each document imported when its imports were last followed.
    followed: HashMap<SourceFile, Vec<String>>,
    target: Target,
    pool: Pool,
    versions: Versions,
    on_change: OnChange,
    /// Where an interrupted analysis asks to run again.
    requeue: mpsc::Sender<Task>,
}

impl Host {
    fn new(
        pool: Pool,
        versions: Versions,
        on_change: OnChange,
        requeue: mpsc::Sender<Task>,
    ) -> Host {
        let db = RootDatabase::default();
        let _settings = Settings::builder(Target::default(), Vec::new())
            .durability(salsa::Durability::HIGH)
            .new(&db);
        Host {
            db,
            documents: Arc::default(),
            imported: HashMap::new(),
            followed: HashMap::new(),
            target: Target::default(),
            pool,
            versions,
            on_change,
            requeue,
        }
    }

    fn run(mut self, inbox: &mpsc::Receiver<Task>) {
        while let Ok(task) = inbox.recv() {
            let mut changed = Vec::new();
            let mut next = Some(task);
            // Apply every edit that arrives within the batch window before analysing: only the
            // last one's diagnostics matter. A read stops the batch, since it must see exactly
            // the edits before it.
            while let Some(task) = next.take() {
                match task {
                    Task::Read(job) => {
                        self.flush(&mut changed);
                        let snapshot = self.snapshot();
                        self.pool.run(Box::new(move || job(snapshot)));
                    }
                    Task::Reanalyse(uri) => {
                        if self.documents.contains_key(&uri) && !changed.contains(&uri) {
                            changed.push(uri);
                        }
                        next = inbox.recv_timeout(BATCH_WINDOW).ok();
                    }
                    edit => {
                        if let Some(uri) = self.apply(edit) {
                            // The documents that import the edited one are analysed again too.
                            for uri in std::iter::once(uri.clone()).chain(self.importers_of(&uri)) {
                                if !changed.contains(&uri) {
                                    changed.push(uri);
                                }
                            }
                        }
                        next = inbox.recv_timeout(BATCH_WINDOW).ok();
                    }
                }
            }
            self.flush(&mut changed);
        }
    }

    /// Starts the analysis of every changed document, each in its own job so that a slow one
    /// delays no other.
    fn flush(&mut self, changed: &mut Vec<Uri>) {
        for uri in std::mem::take(changed) {
            let snapshot = self.snapshot();
            let on_change = Arc::clone(&self.on_change);
            let requeue = self.requeue.clone();
            self.pool.run(Box::new(move || {
                if on_change(snapshot, uri.clone()) == Analysis::Interrupted {
                    let _ = requeue.send(Task::Reanalyse(uri));
                }
            }));
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            db: self.db.clone(),
            documents: Arc::clone(&self.documents),
            target: self.target,
        }
    }

    /// Applies an edit; returns the document it changed.
    fn apply(&mut self, task: Task) -> Option<Uri> {
        match task {
            Task::Open {
                uri,
                path,
                version,
                text,
                manifest,
            } => {
                let known = self
                    .documents
                    .get(&uri)
                    .map(|document| document.file)
                    .or_else(|| self.imported.remove(&path));
                let file = match known {
                    Some(file) => {
                        self.set_text(file, text);
                        file
                    }
                    None => SourceFile::new(&self.db, path.clone(), text, manifest),
                };
                self.follow_imports(file);
                self.set_document(
                    uri.clone(),
                    Document {
                        file,
                        version,
                        path,
                    },
                );
                Some(uri)
            }
            Task::Change { uri, version, text } => {
                let document = self.documents.get(&uri)?.clone();
                if version <= document.version {
                    tracing::debug!("dropped change {version} of {}: not newer", uri.as_str());
                    return None;
                }
                self.set_text(document.file, text);
                self.follow_imports(document.file);
                self.set_document(
                    uri.clone(),
                    Document {
                        version,
                        ..document
                    },
                );
                Some(uri)
            }
            Task::Close { uri } => {
                if let Some(document) = Arc::make_mut(&mut self.documents).remove(&uri) {
                    self.followed.remove(&document.file);
                }
                lock(&self.versions).remove(&uri);
                Some(uri)
            }
            Task::Target(target) => {
                self.target = target;
                if let Some(settings) = Settings::try_get(&self.db) {
                    settings.set_target(&mut self.db).to(target);
                }
                None
            }
            Task::Read(_) | Task::Reanalyse(_) => None,
        }
    }

    fn set_text(&mut self, file: SourceFile, text: String) {
        // A setter always counts as a change; an unchanged text must not invalidate anything.
        if *file.text(&self.db) != text {
            file.set_text(&mut self.db).to(text);
        }
    }

    /// Loads the workspace files `file` imports that are neither open nor loaded yet, so that its
    /// imports resolve. Looking for them touches the disk, so it is done only when the names the
    /// file imports change, not on every keystroke.
    fn follow_imports(&mut self, file: SourceFile) {
        let names = tilec_frontend::imported_names(tilec_db::parse(&self.db, file));
        if self.followed.get(&file) == Some(&names) {
            return;
        }
        self.followed.insert(file, names);
        let known: std::collections::HashSet<PathBuf> = self
            .documents
            .values()
            .map(|document| document.path.clone())
            .chain(self.imported.keys().cloned())
            .collect();
        let loaded = crate::workspace::load_imported_files(&mut self.db, &[file], &|path| {
            known.contains(path)
        });
        for module in loaded {
            self.imported.insert(module.path(&self.db).clone(), module);
        }
    }

    /// The open documents other than `uri` that import it, directly or through other modules.
    fn importers_of(&self, uri: &Uri) -> Vec<Uri> {
        let Some(edited) = self.documents.get(uri).map(|document| document.file) else {
            return Vec::new();
        };
        self.documents
            .iter()
            .filter(|(other, _)| *other != uri)
            .filter(|(_, document)| tilec_db::imports_module(&self.db, document.file, edited))
            .map(|(other, _)| other.clone())
            .collect()
    }

    fn set_document(&mut self, uri: Uri, document: Document) {
        lock(&self.versions).insert(uri.clone(), document.version);
        Arc::make_mut(&mut self.documents).insert(uri, document);
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

type Job = Box<dyn FnOnce() + Send>;

/// Worker threads with large stacks, fed from one queue. A job never waits while a thread could
/// be started for it: when no worker is idle, another is started, up to [`MAX_WORKERS`].
struct Pool {
    jobs: mpsc::Sender<Job>,
    queue: Arc<Mutex<mpsc::Receiver<Job>>>,
    /// Idle workers less the jobs waiting in the queue: at most zero means a new job would wait.
    idle: Arc<AtomicIsize>,
    started: usize,
}

impl Pool {
    fn start(workers: usize) -> Pool {
        let (jobs, queue) = mpsc::channel::<Job>();
        let mut pool = Pool {
            jobs,
            queue: Arc::new(Mutex::new(queue)),
            idle: Arc::new(AtomicIsize::new(0)),
            started: 0,
        };
        for _ in 0..workers.max(1) {
            if pool.spawn() {
                pool.idle.fetch_add(1, Ordering::SeqCst);
            }
        }
        pool
    }

    /// Starts a worker (counted idle by the caller); false when the thread cannot start.
    fn spawn(&mut self) -> bool {
        let queue = Arc::clone(&self.queue);
        let idle = Arc::clone(&self.idle);
        let spawned = std::thread::Builder::new()
            .name(format!("tilec-worker-{}", self.started))
            // Workers recurse over syntax trees (see `tilec-db`'s invariants), as the CLI's
            // analysis thread does, so they get its stack.
            .stack_size(tilec_frontend::ANALYSIS_STACK_BYTES)
            .spawn(move || {
                loop {
                    let job = lock(&queue).recv();
                    let Ok(job) = job else { break };
                    // A bug in one job must not take the worker down; the job's own catch
                    // answers its request.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
                    idle.fetch_add(1, Ordering::SeqCst);
                }
            });
        match spawned {
            Ok(_) => {
                self.started += 1;
                true
            }
            Err(error) => {
                tracing::error!("cannot start a worker thread: {error}");
                false
            }
        }
    }

    fn run(&mut self, job: Job) {
        let idle_before = self.idle.fetch_sub(1, Ordering::SeqCst);
        if idle_before <= 0 && self.started < MAX_WORKERS && self.spawn() {
            self.idle.fetch_add(1, Ordering::SeqCst);
        }
        if self.jobs.send(job).is_err() {
            tracing::error!("the worker pool is gone");
        }
    }
}

/// Why a read produced no answer.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// An edit arrived while it ran.
    Cancelled,
    /// A bug: the message of the panic.
    Panicked(String),
}

/// Runs a read, turning salsa's cancellation and any other panic into a [`ReadFailure`].
pub(crate) fn guarded<T>(read: impl FnOnce() -> T) -> Result<T, ReadFailure> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| {
        salsa::Cancelled::catch(AssertUnwindSafe(read))
    })) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(ReadFailure::Cancelled),
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(ReadFailure::Panicked(message))
        }
    }
}

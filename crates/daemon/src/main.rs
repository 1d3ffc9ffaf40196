//! `tilec`: check, inspect and benchmark TileLang kernels from the command line.

mod bench;
mod build;
mod cache;
mod check;
mod discover;
mod estimate;
mod explain;
mod layout;
mod progress;
mod remote;
mod render;
mod run;
mod svg;
mod tiers;
mod tune;
mod tuned;
mod watch;
mod workspace;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::workspace::InstanceSelection;

/// tilec reads TileLang kernels (`.py` files) without running Python: it finds every kernel instance,
/// evaluates the meta-level Python, and checks the tile program in milliseconds.
#[derive(Debug, Parser)]
#[command(name = "tilec", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Diagnostics with source snippets, for people.
    Human,
    /// JSON Lines, one record per line; `--format`'s help says which records this command writes.
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Emit {
    /// The PTX too when NVRTC is available, the CUDA source alone otherwise.
    Auto,
    /// The CUDA C++ source only (NVRTC compiles it without any header).
    Cuda,
    /// The CUDA source and the PTX NVRTC makes of it (needs libnvrtc, not a GPU), with what ptxas
    /// reports per kernel: registers, spills, shared memory. An error without NVRTC.
    Ptx,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check every kernel instance in the given files or folders (default: the current folder).
    ///
    /// Exits with 1 when there is an error-level diagnostic, 2 when a path cannot be read. What
    /// tilec cannot analyse yet (`not-analysed`: an operation or Python construct it does not
    /// support) is reported but is not an error of the kernel: it fails the check only with
    /// `--strict`.
    Check {
        /// Files or folders; folders are searched recursively for `.py` files.
        paths: Vec<PathBuf>,
        /// Output format. JSON Lines: one `"kind": "instance"` record per kernel instance (its
        /// arguments and where they come from) and one `"kind": "diagnostic"` record per
        /// diagnostic (file, line, column, severity, code, message, kernel, instance, related).
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// GPU architecture to check against (sm_80 or sm_90); overrides tilec.toml.
        #[arg(long)]
        target: Option<String>,
        /// Exit with 1 also when tilec cannot analyse a construct (`not-analysed`), not only on
        /// the kernels' errors.
        #[arg(long)]
        strict: bool,
    },
    /// Print the kernel world (the IR tilec builds) of a file's instances.
    Ir {
        file: PathBuf,
        /// Only this kernel (the factory or jit function name).
        #[arg(long)]
        kernel: Option<String>,
        /// Only this instance of the kernel (0-based).
        #[arg(long)]
        instance: Option<u32>,
    },
    /// Print the inferred layout of every fragment and parallel loop: thread and local-index
    /// formulas, replication, registers, where the layout came from, and a thread-ownership grid.
    Layout {
        file: PathBuf,
        #[command(flatten)]
        selection: InstanceSelection,
        /// Only this fragment buffer.
        #[arg(long)]
        buffer: Option<String>,
        /// Output format. JSON Lines: one `"kind": "fragment"` record per fragment (thread and
        /// index formulas, replication, registers per thread), one `"kind": "loop"` record per
        /// parallel loop (thread formula, vector width, plan) and one `"kind": "kernel"` record per
        /// launch (threads, shared memory, registers, occupancy); with `--svg`, one `"kind": "svg"`
        /// record per picture written.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Instead of printing the layouts, draw each selected fragment as an SVG thread-ownership
        /// map. One fragment is written to OUT (or into OUT when it is a folder); several go into
        /// the folder OUT (created if missing) as `<kernel>-<instance>-<buffer>.svg`. The paths
        /// written are printed.
        #[arg(long, value_name = "OUT")]
        svg: Option<PathBuf>,
    },
    /// Explain a diagnostic code (`tilec explain shape-mismatch`); without a code, list them.
    Explain { code: Option<String> },
    /// Run a kernel instance: on the GPU when there is one, on the CPU emulator otherwise. Inputs
    /// are seeded random values; prints where it ran, the time and the bytes moved per second.
    Run {
        file: PathBuf,
        #[command(flatten)]
        selection: InstanceSelection,
        #[arg(long, value_enum, default_value_t = run::DeviceChoice::Auto)]
        device: run::DeviceChoice,
        /// Write every tensor parameter as DIR/in/<param>.npy before the launch and
        /// DIR/out/<param>.npy after it (bfloat16 as float32).
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
        /// Read the tensor parameter NAME from a .npy file instead of random values: offsets,
        /// block tables and lengths a kernel reads indices from need real values. Repeatable; the
        /// file's shape must be the parameter's, its values are rounded to the parameter's dtype.
        #[arg(long, value_name = "NAME=FILE", value_parser = parse_input)]
        input: Vec<(String, PathBuf)>,
        /// Time 50 launches after a warm-up (at least 5 launches and 100 ms) and report the median (GPU only).
        #[arg(long)]
        bench: bool,
        /// On a GPU, also run the emulator on the same inputs and compare (small launches only).
        #[arg(long)]
        check: bool,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The cache folder whose `tilec tune` results apply (on a GPU, without --with).
        #[arg(long, value_name = "DIR", default_value = ".tilec-cache")]
        cache: PathBuf,
        /// The architecture to generate code for: sm_80 (mma.sync) or sm_90 (wgmma). Default: the
        /// GPU's, or tilec.toml's target on the emulator, else sm_90.
        #[arg(long)]
        target: Option<String>,
        /// Launch this CUDA file in place of the code tilec generates (GPU only): for trying a
        /// change to the generated code by hand before teaching it to the compiler. The file must
        /// define the same kernel with the same parameters. Block, inputs, timing and `--save`
        /// stay those of the instance; the grid and the dynamic shared memory are the file's, from
        /// its `// Launch:` header. Start from `tilec build --emit cuda`.
        #[arg(long, value_name = "FILE")]
        cuda_source: Option<PathBuf>,
        /// Seconds the CPU emulator may run the launch before it stops with an error (default:
        /// as long as it takes). Pass smaller sizes with `--with` to emulate a large kernel.
        #[arg(long, value_name = "SECONDS", value_parser = parse_budget)]
        emulator_budget: Option<f64>,
        /// Emulate even when the estimate says it takes minutes: without it, `tilec run` refuses
        /// an emulation estimated past 30 seconds and names smaller `--with` sizes.
        #[arg(long)]
        force: bool,
        /// On the CPU emulator (and on a GPU with --check, which runs the emulator beside it),
        /// run an instance estimated past SECONDS (default 5) at smaller sizes instead: integer
        /// arguments that are problem dimensions are halved, the largest first, until the
        /// estimate fits; the sizes are printed as `--with` flags.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, require_equals = true,
              default_missing_value = "5",
              value_parser = parse_budget)]
        shrink: Option<f64>,
    },
    /// Rank a kernel's tile configurations (block sizes, threads, stages) by a hardware model
    /// (`--recommend`, no GPU needed), or measure the top candidates on the GPUs and store the
    /// fastest correct one for `tilec run` and `tilec build`.
    ///
    /// Measuring spreads the candidates over the GPUs (`--gpus`), one worker each; a candidate is
    /// compared only with the current configuration measured on the same GPU.
    Tune {
        file: PathBuf,
        #[command(flatten)]
        selection: InstanceSelection,
        /// Rank by the hardware model only, without running anything.
        #[arg(long)]
        recommend: bool,
        /// How many configurations to print (with --recommend) or to measure (default 10).
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// The hardware model: H200, H100-SXM or A100-SXM4 (default: the GPU found, else the
        /// target's: H200 for sm_90, A100-SXM4 for sm_80).
        #[arg(long)]
        gpu: Option<String>,
        /// The GPUs that measure, by number: `0,1` (default: every GPU of the host that is the
        /// same model as GPU 0). Each measures the current configuration, then takes candidates
        /// until none is left; all must be one model.
        #[arg(
            long,
            value_name = "LIST",
            value_parser = tune::parse_gpu_list,
            conflicts_with = "recommend"
        )]
        gpus: Option<tune::GpuList>,
        /// GPU architecture (sm_80 or sm_90) whose default model to use without a GPU.
        #[arg(long)]
        target: Option<String>,
        /// The cache folder the winner is stored in (the build cache's).
        #[arg(long, value_name = "DIR", default_value = ".tilec-cache")]
        cache: PathBuf,
        /// Seed of the random inputs the candidates are checked on.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Run the language server on stdin and stdout (for editors; the VS Code extension starts it).
    /// Logs go to stderr, filtered by `TILEC_LOG` (`info`, `debug`, ...).
    Lsp,
    /// Build every kernel instance under the paths: `.cu`, `.ptx` (with NVRTC) and `.json` per
    /// instance in `--out`, through a content-addressed cache, so unchanged kernels cost nothing.
    ///
    /// Exits with 1 when a file or an instance failed (the others are written all the same), 2
    /// when a file cannot be read (after building the rest) or the build cannot start.
    Build {
        /// Files or folders (default: the current folder).
        paths: Vec<PathBuf>,
        /// The output folder: `<file>/<kernel>-<instance>.cu`, `.ptx` and `.json` per instance.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The content-addressed cache of compiled kernels, shared by every build that names it.
        #[arg(long, value_name = "DIR", default_value = ".tilec-cache")]
        cache: PathBuf,
        /// With `--with`, one file only.
        #[command(flatten)]
        selection: InstanceSelection,
        #[arg(long, value_enum, default_value_t = Emit::Auto)]
        emit: Emit,
        /// GPU architecture: sm_80 or sm_90 (default: tilec.toml's, else sm_90).
        #[arg(long)]
        target: Option<String>,
        /// Output format. JSON Lines: one `"kind": "build-instance"` record per instance (status
        /// and the path of its `.json` description), one `"kind": "build-file"` record per file
        /// that gave no instance, and a closing `"kind": "build-summary"` record with the counts
        /// and the cache's statistics.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Whether this build may store what it compiled in the remote cache (`[cache] remote`
        /// of tilec.toml, or `TILEC_CACHE_REMOTE`). Read-only suits untrusted jobs, such as pull
        /// requests from forks.
        #[arg(long, value_enum, default_value_t = remote::RemoteMode::ReadWrite)]
        cache_remote_mode: remote::RemoteMode,
    },
    /// Watch files: on every save, the file's diagnostics and, for each kernel instance whose code
    /// changed, one status line (compile time, run time and bandwidth on the GPU or the emulator).
    Watch {
        /// Files or folders (default: the current folder).
        paths: Vec<PathBuf>,
        /// Analyse and lower only; run nothing.
        #[arg(long)]
        no_run: bool,
        /// Output format. JSON Lines: per saved file a `"kind": "checked"` record (error and
        /// warning counts) after its `"kind": "diagnostic"` records, one `"kind": "status"` record
        /// per instance whose code changed (result, device, times), and `"idle"`, `"removed"`,
        /// `"error"` and `"restart"` records for the watcher's own events.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// GPU architecture for the generated code: sm_80 or sm_90.
        #[arg(long)]
        target: Option<String>,
        /// Seconds one launch may run on the CPU emulator (or check a GPU run there) before it is
        /// stopped and reported as not run, so that a large instance never holds the session.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_budget)]
        emulator_budget: f64,
    },
    /// Measure per instance the cold time of parse + evaluate + checks, layout inference, and lowering to CUDA, and the time of an edit (use a release build).
    Bench {
        /// Files or folders (default: the current folder).
        paths: Vec<PathBuf>,
        /// Timed repetitions per file; the median is reported.
        #[arg(long, default_value_t = 50)]
        iterations: u32,
    },
}

/// `--emulator-budget SECONDS`: a finite number of seconds, zero or more.
fn parse_budget(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && (0.0..=1e9).contains(&seconds) => Ok(seconds),
        Ok(_) | Err(_) => Err(format!("expected a number of seconds, got `{text}`")),
    }
}

/// `--input NAME=FILE`.
fn parse_input(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            Ok((name.to_owned(), PathBuf::from(path)))
        }
        _ => Err(format!("expected NAME=FILE.npy, got `{text}`")),
    }
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quiet_broken_pipes();
    let cli = Cli::parse();
    // The analysis recurses over the syntax tree, so it runs on a thread with the large stack the
    // front end asks for.
    let worker = std::thread::Builder::new()
        .name("tilec".to_owned())
        .stack_size(tilec_frontend::ANALYSIS_STACK_BYTES);
    match worker
        .spawn(move || run(cli))
        .map(std::thread::JoinHandle::join)
    {
        Ok(Ok(code)) => code,
        Ok(Err(payload)) if panic_text(payload.as_ref()).is_some_and(is_broken_pipe) => {
            ExitCode::SUCCESS
        }
        Ok(Err(_)) => ExitCode::from(101),
        Err(error) => {
            eprintln!("error: cannot start the analysis thread: {error}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Check {
            paths,
            format,
            target,
            strict,
        } => check::run(&paths, format, target.as_deref(), strict),
        Command::Ir {
            file,
            kernel,
            instance,
        } => check::print_ir(&file, kernel.as_deref(), instance),
        Command::Explain { code } => explain::run(code.as_deref()),
        Command::Layout {
            file,
            selection,
            buffer,
            format,
            svg,
        } => layout::run(&file, &selection, buffer.as_deref(), format, svg.as_deref()),
        Command::Bench { paths, iterations } => bench::run(&paths, iterations),
        Command::Run {
            file,
            selection,
            device,
            save,
            input,
            bench,
            check,
            seed,
            cache,
            target,
            cuda_source,
            emulator_budget,
            force,
            shrink,
        } => run::run(
            &file,
            &run::RunOptions {
                selection,
                device,
                save,
                inputs: input,
                bench,
                check,
                seed,
                cache,
                target,
                cuda_source,
                emulator_budget: emulator_budget.map(std::time::Duration::from_secs_f64),
                force,
                shrink,
            },
        ),
        Command::Tune {
            file,
            selection,
            recommend,
            top,
            gpu,
            gpus,
            target,
            cache,
            seed,
        } => tune::run(
            &file,
            &tune::TuneOptions {
                selection,
                recommend,
                top,
                gpu,
                gpus,
                target,
                cache,
                seed,
            },
        ),
        Command::Watch {
            paths,
            no_run,
            format,
            target,
            emulator_budget,
        } => watch::watch(&watch::WatchOptions {
            paths,
            run: !no_run,
            format,
            target,
            emulator_budget: std::time::Duration::from_secs_f64(emulator_budget),
        }),
        Command::Lsp => tilec_lsp::run_stdio(tilec_lsp::LspOptions {
            tuned: Some(std::sync::Arc::new(tuned::EditorTuning)),
            ..tilec_lsp::LspOptions::for_current_exe()
        })
        .map(|()| ExitCode::SUCCESS)
        .map_err(anyhow::Error::from),
        Command::Build {
            paths,
            out,
            cache,
            selection,
            emit,
            target,
            format,
            cache_remote_mode,
        } => build::build(&build::BuildOptions {
            paths,
            out,
            cache,
            selection,
            target,
            emit,
            format,
            remote_mode: cache_remote_mode,
        }),
    };
    match result {
        Ok(code) => code,
        // A reader that stops early (`tilec layout f.py | head`) is not an error.
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        // A request the command cannot serve (`tilec layout --buffer nope`) is the user's to fix,
        // like a kernel error; only what stops tilec from working at all exits with 2.
        Err(error) if error.downcast_ref::<workspace::Refusal>().is_some() => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Whether a panic payload is the standard library's report of a write to a closed pipe
/// (`println!` into `| head`).
fn is_broken_pipe(message: &str) -> bool {
    message.contains("failed printing to std") && message.contains("Broken pipe")
}

/// The text of a panic payload, when it has one.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
}

/// A reader that stops early (`tilec ir f.py | head`) closes the pipe; Rust ignores SIGPIPE, so the
/// next `println!` panics. Every command prints through `println!` somewhere, so rather than trust
/// each to use fallible writes, the panic that report makes is kept quiet here and [`main`] exits
/// with 0 on it, as a C program killed by SIGPIPE would be seen as done by the shell.
fn quiet_broken_pipes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !panic_text(info.payload()).is_some_and(is_broken_pipe) {
            default(info);
        }
    }));
}

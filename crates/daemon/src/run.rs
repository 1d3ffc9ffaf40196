//! `tilec run`: lower an instance to thread programs, then run them on the GPU (NVRTC + cudarc) or
//! on the CPU emulator.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tilec_db::{Db, Instance, SourceFile, cuda_source, lowering_diagnostics, thread_programs};
use tilec_ir::thread::persistent_blocks;
use tilec_ir::{ConstValue, Target, ThreadProgram};
use tilec_runtime::cuda::{DeviceTensor, EncodedTensorMap, LaunchArg, Repetitions};
use tilec_runtime::emulator::ErrorKind;
use tilec_runtime::tensor::RandomError;
use tilec_runtime::{
    CudaDevice, HostTensor, compare, inputs, npy, run_program_observed, run_program_within,
    tolerance_in,
};

use crate::estimate::{REFUSE_SECONDS, SUGGEST_SECONDS, emulator_seconds, smaller_sizes};
use crate::progress::EmulatorProgress;
use crate::render;
use crate::tuned::apply_tuned;
use crate::workspace::{InstanceSelection, Workspace, load_one, parse_target, refuse};
use tilec_runtime::tuned::TunedFor;

/// Where `tilec run` executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DeviceChoice {
    /// The GPU when there is one, the CPU emulator otherwise.
    Auto,
    Cpu,
    Cuda,
}

/// What `tilec run` was asked to do.
#[derive(Debug)]
pub(crate) struct RunOptions {
    /// `--kernel`, `--instance` and `--with`.
    pub selection: InstanceSelection,
    pub device: DeviceChoice,
    pub save: Option<PathBuf>,
    /// `--input NAME=FILE`: tensor parameters read from .npy files instead of random values.
    pub inputs: Vec<(String, PathBuf)>,
    pub bench: bool,
    pub check: bool,
    pub seed: u64,
    /// The cache folder whose tuning results (`tilec tune`) apply.
    pub cache: PathBuf,
    /// `--target`: the architecture to generate code for.
    pub target: Option<String>,
    /// `--cuda-source`: a hand-edited CUDA file launched in place of the generated code.
    pub cuda_source: Option<PathBuf>,
    /// `--emulator-budget`: how long the CPU emulator may run the launch (`None`: as long as it
    /// takes).
    pub emulator_budget: Option<Duration>,
    /// `--force`: emulate even what the estimate says takes minutes.
    pub force: bool,
    /// `--shrink[=SECONDS]`: on the CPU emulator, run an instance estimated past SECONDS at
    /// smaller sizes that are not, instead of refusing it.
    pub shrink: Option<f64>,
}

/// The emulator runs at most this many thread-iterations of blocks × threads for `--check`; beyond
/// it the comparison is skipped with a note, since the emulator would take minutes.
pub(crate) const CHECK_LIMIT_THREADS: i64 = 1 << 20;

/// The target a run (or a measured tuning) generates code for: `--target`, which a GPU must be
/// able to run; else the GPU's own; else tilec.toml's; else sm_90.
pub(crate) fn run_target(
    named: Option<&str>,
    device: Option<&CudaDevice>,
    workspace: &Workspace,
) -> Result<Target> {
    let device_target = device.and_then(CudaDevice::target);
    let Some(target) = parse_target(named)? else {
        return Ok(device_target
            .or(workspace.manifest_target)
            .unwrap_or_default());
    };
    if let (Some(device), Some(own)) = (device, device_target)
        && own != target
        && !(own == Target::Sm90 && target == Target::Sm80)
    {
        bail!(
            "--target {target} cannot run on {} ({own}); leave --target out or use --device cpu",
            device.name()
        );
    }
    Ok(target)
}

pub(crate) fn run(path: &Path, options: &RunOptions) -> Result<ExitCode> {
    let (workspace, file) = load_one(path)?;
    let db = &workspace.db;
    let device = open_device(options.device)?;
    let target = run_target(options.target.as_deref(), device.as_ref(), &workspace)?;
    let _settings = workspace.apply_settings(target);
    let instance = options.selection.pick(db, file)?;
    // On a GPU, a configuration `tilec tune` measured on this device replaces the call site's,
    // unless --with names values.
    let instance = match &device {
        Some(gpu) if options.selection.with.is_empty() => apply_tuned(
            db,
            &options.cache,
            path,
            instance,
            &TunedFor::Device(gpu.name()),
        ),
        _ => instance,
    };
    let programs = match lowered(db, file, instance)? {
        Some(programs) => programs,
        None => return Ok(ExitCode::from(1)),
    };
    // With --check the emulator runs beside the GPU, on the same sizes: shrinking applies there.
    let emulated = device.is_none() || options.check;
    let (instance, programs, scalars) = match options.shrink.filter(|_| emulated) {
        Some(target_seconds) => shrunk(db, instance, programs, target_seconds)?,
        None => {
            let scalars = scalar_values(db, instance, &programs)?;
            (instance, programs, scalars)
        }
    };
    if device.is_none() {
        before_emulating(db, instance, &programs, &scalars, options)?;
    }
    let replacement =
        replacement_source(options.cuda_source.as_deref(), device.as_ref(), &programs)?;
    let describe = describe_instance(db, instance);
    let mut stdout = std::io::stdout().lock();
    let program = first_program(&programs)?;
    // On the emulator the budget covers filling the inputs too: at a kernel's real sizes that
    // alone can take seconds.
    let budget_started = Instant::now();
    let emulator_budget = options.emulator_budget.filter(|_| device.is_none());
    let mut tensors = input_tensors(
        program,
        &scalars,
        (options.seed, device.is_some()),
        emulator_budget,
    )?;
    read_inputs(&options.inputs, program, &mut tensors)?;
    if let Some(dir) = &options.save {
        save_tensors(&dir.join("in"), program, &tensors)?;
    }
    // Only the comparison with the emulator needs the inputs again; a copy of every tensor is
    // too much memory to spend otherwise.
    let inputs_before = (options.check && device.is_some()).then(|| tensors.clone());
    match &device {
        Some(device) => {
            let cuda = generated_cuda(db, instance, target)?;
            let (seconds, _) = run_on_gpu(
                device,
                &programs,
                &cuda,
                &scalars,
                &mut tensors,
                options.bench,
                replacement.as_deref(),
            )?;
            report(
                &mut stdout,
                &describe,
                &format!("GPU ({})", device.name()),
                program,
                &tensors,
                seconds,
                options.bench,
            )?;
            if let Some(inputs_before) = inputs_before {
                let verdict = check_against_emulator(&programs, &scalars, inputs_before, &tensors)?;
                print_check(&mut stdout, &verdict)?;
            }
        }
        None => {
            let started = Instant::now();
            let launches = programs.len();
            for (index, program) in programs.iter().enumerate() {
                let left =
                    emulator_budget.map(|budget| budget.saturating_sub(budget_started.elapsed()));
                let mut progress =
                    EmulatorProgress::new((launches > 1).then_some((index + 1, launches)));
                let result =
                    run_program_observed(program, &mut tensors, &scalars, left, &mut |d, t| {
                        progress.update(d, t)
                    });
                progress.finish();
                let ran = result.map_err(|error| anyhow::anyhow!("emulator: {error}"))?;
                warn_block_order(program, &ran.block_order);
            }
            let seconds = started.elapsed().as_secs_f64();
            report(
                &mut stdout,
                &describe,
                "the CPU emulator",
                program,
                &tensors,
                seconds,
                false,
            )?;
        }
    }
    if let Some(dir) = &options.save {
        save_tensors(&dir.join("out"), program, &tensors)?;
        writeln!(
            stdout,
            "saved inputs to {} and outputs to {}",
            dir.join("in").display(),
            dir.join("out").display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--shrink`: the instance at smaller sizes estimated under `target_seconds` on the emulator, with
/// its programs and scalars, after saying which sizes; the instance itself when it is already
/// under. Sizes known only at run time get values here too. When no smaller sizes get there the
/// instance is kept, and the usual refusal applies.
fn shrunk<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    programs: Vec<ThreadProgram>,
    target_seconds: f64,
) -> Result<(Instance<'db>, Vec<ThreadProgram>, Vec<i64>)> {
    let scalars = scalar_values(db, instance, &programs);
    if let Ok(scalars) = &scalars
        && emulator_seconds(&programs, scalars).is_none_or(|s| s <= target_seconds)
    {
        return Ok((instance, programs, scalars.clone()));
    }
    let original = scalars
        .as_ref()
        .ok()
        .and_then(|scalars| emulator_seconds(&programs, scalars));
    let smaller = smaller_sizes(db, instance, target_seconds)
        .filter(|smaller| !smaller.assignments.is_empty())
        .filter(|smaller| original.is_none_or(|original| smaller.seconds < original));
    let Some(smaller) = smaller else {
        eprintln!(
            "note: --shrink found no smaller sizes of {} for the emulator",
            describe_instance(db, instance),
        );
        return Ok((instance, programs, scalars?));
    };
    eprintln!(
        "note: emulating at smaller sizes (--shrink): --with {} (estimated: {})",
        smaller.assignments.join(" --with "),
        format_estimate(smaller.seconds)
    );
    let programs = thread_programs(db, smaller.instance)
        .as_ref()
        .clone()
        .map_err(|_| anyhow::anyhow!("the smaller instance no longer lowers"))?;
    let scalars = scalar_values(db, smaller.instance, &programs)?;
    Ok((smaller.instance, programs, scalars))
}

/// What `tilec run` says before the CPU emulator starts: which GPU-only flags it ignores, and how
/// long the run should take. An emulation estimated past [`REFUSE_SECONDS`] is refused, with
/// smaller `--with` sizes that take seconds, unless `--force` or `--emulator-budget` bounds the wait.
fn before_emulating(
    db: &dyn Db,
    instance: Instance<'_>,
    programs: &[ThreadProgram],
    scalars: &[i64],
    options: &RunOptions,
) -> Result<()> {
    if options.bench {
        eprintln!("note: --bench is ignored on the CPU emulator (it times GPU launches)");
    }
    if options.check {
        eprintln!("note: --check is ignored on the CPU emulator (it compares a GPU run with it)");
    }
    let Some(seconds) = emulator_seconds(programs, scalars) else {
        return Ok(());
    };
    if seconds > REFUSE_SECONDS && !options.force && options.emulator_budget.is_none() {
        let describe = describe_instance(db, instance);
        let advice = match smaller_sizes(db, instance, SUGGEST_SECONDS) {
            Some(smaller)
                if !smaller.assignments.is_empty() && smaller.seconds <= REFUSE_SECONDS =>
            {
                let flags: Vec<String> = smaller
                    .assignments
                    .iter()
                    .map(|a| format!("--with {a}"))
                    .collect();
                format!(
                    "; `{}` takes about {} (or pass --force to wait, or --shrink to run at \
                     those sizes)",
                    flags.join(" "),
                    format_estimate(smaller.seconds)
                )
            }
            Some(_) | None => "; pass smaller sizes with --with, or --force to wait".to_owned(),
        };
        refuse!(
            "{describe} would take the CPU emulator about {} (estimated){advice}",
            format_estimate(seconds)
        );
    }
    if std::io::stderr().is_terminal() && seconds >= 1.0 {
        eprintln!(
            "running {} on the CPU emulator: about {} (estimated)...",
            describe_instance(db, instance),
            format_estimate(seconds)
        );
    }
    Ok(())
}

/// An estimated duration in the unit a person would say it in.
fn format_estimate(seconds: f64) -> String {
    if seconds < 1.0 {
        "under a second".to_owned()
    } else if seconds < 120.0 {
        format!("{seconds:.0} s")
    } else if seconds < 7200.0 {
        format!("{:.0} minutes", seconds / 60.0)
    } else {
        format!("{:.0} hours", seconds / 3600.0)
    }
}

/// The text of `--cuda-source`, after checking that it can stand in for the generated code: a GPU
/// runs it, and the instance launches one kernel (whose launch shape and parameters it keeps).
fn replacement_source(
    path: Option<&Path>,
    device: Option<&CudaDevice>,
    programs: &[ThreadProgram],
) -> Result<Option<String>> {
    let Some(path) = path else {
        return Ok(None);
    };
    if device.is_none() {
        bail!("--cuda-source runs on a GPU only; the emulator runs tilec's own thread programs");
    }
    if programs.len() != 1 {
        bail!(
            "--cuda-source replaces a single kernel, but this instance launches {}",
            programs.len()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --cuda-source {}", path.display()))?;
    eprintln!(
        "note: launching {} in place of the generated code",
        path.display()
    );
    Ok(Some(text))
}

fn first_program(programs: &[ThreadProgram]) -> Result<&ThreadProgram> {
    programs
        .first()
        .context("the kernel has no `with T.Kernel(...)` launch")
}

/// The instance's thread programs, or `None` after printing why it cannot be lowered (its check
/// diagnostics first, since an error there usually explains the rest).
fn lowered(
    db: &dyn Db,
    file: SourceFile,
    instance: Instance<'_>,
) -> Result<Option<Vec<ThreadProgram>>> {
    if let Ok(programs) = thread_programs(db, instance).as_ref() {
        return Ok(Some(programs.clone()));
    }
    let path = file.path(db);
    let text = file.text(db);
    let mut problems: Vec<_> = tilec_db::file_diagnostics(db, file)
        .iter()
        .filter(|d| d.severity.stops_analysis())
        .filter(|d| d.kernel.as_deref() == Some(instance.kernel(db).name(db).as_str()))
        .filter(|d| d.shown_by.is_empty() || d.shown_by.contains(&instance.index(db)))
        .cloned()
        .collect();
    if problems.is_empty() {
        problems = lowering_diagnostics(db, instance);
    }
    for diagnostic in &problems {
        eprintln!("{}\n", render::human(path, text, diagnostic, false));
    }
    if problems.is_empty() {
        eprintln!("error: the kernel could not be evaluated far enough to run (see `tilec check`)");
    }
    Ok(None)
}

/// The CUDA of each launch of `instance` lowered for `target`, from the `db` query that prints and
/// memoizes it (the printer gets the target the programs were lowered for).
pub(crate) fn generated_cuda(
    db: &dyn Db,
    instance: Instance<'_>,
    target: Target,
) -> Result<Arc<[String]>> {
    cuda_source(db, instance, target).clone().with_context(|| {
        format!(
            "`{}` does not lower for {target}",
            instance.kernel(db).name(db)
        )
    })
}

/// Values for the programs' symbolic dimensions, from the instance's arguments by name.
pub(crate) fn scalar_values(
    db: &dyn Db,
    instance: Instance<'_>,
    programs: &[ThreadProgram],
) -> Result<Vec<i64>> {
    let Some(program) = programs.first() else {
        return Ok(Vec::new());
    };
    program
        .scalars
        .iter()
        .map(|scalar| {
            instance
                .args(db)
                .iter()
                .find(|(name, _)| *name == scalar.name)
                .and_then(|(_, value)| match value {
                    ConstValue::Int(v) => Some(*v),
                    _ => None,
                })
                .with_context(|| {
                    format!(
                        "the dynamic dimension `{}` needs a value: pass --with {}=<int>",
                        scalar.name, scalar.name
                    )
                })
        })
        .collect()
}

fn describe_instance(db: &dyn Db, instance: Instance<'_>) -> String {
    let args: Vec<String> = instance
        .args(db)
        .iter()
        .map(|(name, value)| format!("{name}={}", render::const_json(value)))
        .collect();
    format!("{}({})", instance.kernel(db).name(db), args.join(", "))
}

/// The GPU to run on, or `None` for the emulator (with a note when `auto` found none).
fn open_device(choice: DeviceChoice) -> Result<Option<CudaDevice>> {
    match choice {
        DeviceChoice::Cpu => Ok(None),
        DeviceChoice::Cuda => CudaDevice::open()
            .map(Some)
            .map_err(|why| anyhow::anyhow!("no GPU to run on: {why}")),
        DeviceChoice::Auto => match CudaDevice::open() {
            Ok(device) => Ok(Some(device)),
            Err(why) => {
                eprintln!("note: no GPU ({why}); running on the CPU emulator");
                Ok(None)
            }
        },
    }
}

/// Runs the launches on the GPU and returns (kernel seconds, compile seconds): the median launch
/// time when benchmarking, one launch's otherwise, and what NVRTC took (nothing on a cache hit).
/// The tensors are uploaded first and replaced by what the GPU left in them. `cuda` is each
/// program's generated code; `replacement` is CUDA text compiled in place of the (single)
/// program's.
pub(crate) fn run_on_gpu(
    device: &CudaDevice,
    programs: &[ThreadProgram],
    cuda: &[String],
    scalars: &[i64],
    tensors: &mut [HostTensor],
    bench: bool,
    replacement: Option<&str>,
) -> Result<(f64, f64)> {
    let uploaded = upload_all(device, tensors)?;
    let repetitions = if bench { BENCH } else { ONCE };
    let timing = launch_programs(
        device,
        (programs, cuda),
        scalars,
        &uploaded,
        repetitions,
        replacement,
    )?;
    download_all(device, &uploaded, tensors)?;
    Ok(timing)
}

/// 50 timed launches after a warm-up of at least 5 launches and 100 ms (see
/// [`Repetitions::warmup_time`]).
pub(crate) const BENCH: Repetitions = Repetitions {
    warmup: 5,
    warmup_time: Duration::from_millis(100),
    iterations: 50,
};
const ONCE: Repetitions = Repetitions {
    warmup: 0,
    warmup_time: Duration::ZERO,
    iterations: 1,
};

/// Device buffers for `tilec tune`'s candidates, which all take the same parameters: tensors a
/// kernel only reads are uploaded once and shared; the written ones are uploaded again for each
/// candidate, so every candidate starts from the same inputs.
pub(crate) struct SharedInputs<'a> {
    device: &'a CudaDevice,
    inputs: &'a [HostTensor],
    written: Vec<bool>,
    buffers: Vec<DeviceTensor>,
}

impl<'a> SharedInputs<'a> {
    pub(crate) fn upload(
        device: &'a CudaDevice,
        program: &ThreadProgram,
        inputs: &'a [HostTensor],
    ) -> Result<SharedInputs<'a>> {
        let written = program
            .params
            .iter()
            .map(|p| p.access != tilec_ir::thread::ParamAccess::Read)
            .collect();
        Ok(SharedInputs {
            device,
            inputs,
            written,
            buffers: upload_all(device, inputs)?,
        })
    }

    /// One launch of `programs` on fresh copies of the written tensors, whose results are
    /// returned (the read-only ones as empty tensors), then the median of [`BENCH`] launches on the same
    /// buffers (timing does not depend on their values).
    pub(crate) fn check_then_time(
        &mut self,
        programs: &[ThreadProgram],
        cuda: &[String],
        scalars: &[i64],
    ) -> Result<(Vec<HostTensor>, f64)> {
        for (k, written) in self.written.iter().enumerate() {
            if let (true, Some(input)) = (*written, self.inputs.get(k)) {
                self.buffers[k] = self
                    .device
                    .upload(input)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        let launches = (programs, cuda);
        launch_programs(self.device, launches, scalars, &self.buffers, ONCE, None)?;
        // Read-only slots stay empty: copying 64 M-element inputs per candidate would cost more
        // than the launches.
        let mut outputs = Vec::with_capacity(self.buffers.len());
        for (buffer, written) in self.buffers.iter().zip(&self.written) {
            outputs.push(if *written {
                self.device
                    .download(buffer)
                    .map_err(|e| anyhow::anyhow!("{e}"))?
            } else {
                HostTensor::zeros(buffer.dtype(), &[0])
            });
        }
        let (seconds, _) =
            launch_programs(self.device, launches, scalars, &self.buffers, BENCH, None)?;
        Ok((outputs, seconds))
    }
}

fn upload_all(device: &CudaDevice, tensors: &[HostTensor]) -> Result<Vec<DeviceTensor>> {
    tensors
        .iter()
        .map(|t| device.upload(t))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn download_all(
    device: &CudaDevice,
    uploaded: &[DeviceTensor],
    tensors: &mut [HostTensor],
) -> Result<()> {
    for (slot, device_tensor) in tensors.iter_mut().zip(uploaded) {
        *slot = device
            .download(device_tensor)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}

/// Compiles (through the module cache) and launches every program on `uploaded`, each with its
/// generated CUDA (`launches` pairs them); `replacement`, when given, is compiled instead of the
/// generated code.
fn launch_programs(
    device: &CudaDevice,
    (programs, cuda): (&[ThreadProgram], &[String]),
    scalars: &[i64],
    uploaded: &[DeviceTensor],
    repetitions: Repetitions,
    replacement: Option<&str>,
) -> Result<(f64, f64)> {
    if cuda.len() != programs.len() {
        bail!(
            "{} launches but CUDA for {}: the code and the programs come from different lowerings",
            programs.len(),
            cuda.len()
        );
    }
    let arch = device.default_arch();
    let (mut seconds, mut compile_seconds) = (0.0, 0.0);
    for (program, generated) in programs.iter().zip(cuda) {
        let source = match replacement {
            Some(text) => text,
            None => generated.as_str(),
        };
        let compile_started = Instant::now();
        let kernel = device
            .compile(
                source,
                &tilec_passes::cuda::kernel_symbol(&program.name),
                &arch,
            )
            .map_err(|failure| {
                anyhow::anyhow!(
                    "NVRTC could not compile `{}`: {}\n{}",
                    program.name,
                    failure.message,
                    failure.log
                )
            })?;
        // A grid barrier needs every block resident at once: a cooperative launch.
        let kernel =
            kernel.with_cooperative_launch(tilec_ir::thread::uses_grid_sync(&program.body));
        compile_seconds += compile_started.elapsed().as_secs_f64();
        // A persistent program gets one block per multiprocessor (it fills one with registers).
        let tiles = launch_grid(program, scalars)?;
        let mut grid = program.launch_blocks(tiles, device.multiprocessors());
        // A hand-edited file may also launch another grid (a persistent kernel that walks the
        // tiles itself, or one block per tile where the program is persistent), from its header.
        match replacement.and_then(declared_launch) {
            Some(DeclaredLaunch::Grid(declared)) => grid = declared,
            Some(DeclaredLaunch::Persistent { tiles }) => {
                grid = persistent_blocks(tiles, device.multiprocessors());
            }
            None => {}
        }
        let block = program.block.map(|b| u32::try_from(b).unwrap_or(1));
        let mut shared = u32::try_from(program.shared_bytes).context("shared memory too large")?;
        // A hand-edited file may need more shared memory (another barrier, a deeper pipeline): its
        // `// Launch:` header line, which tilec prints, says how much.
        if let Some(declared) = replacement.and_then(declared_shared_bytes) {
            shared = declared;
        }
        let maps = encode_tensor_maps(device, program, uploaded)?;
        // The order of the printed kernel's parameters: tensors, scalars, tensor maps.
        let mut args: Vec<LaunchArg<'_>> = uploaded.iter().map(LaunchArg::Tensor).collect();
        // The printed kernel takes its scalars as `int`: one past 32 bits is an error, not a
        // truncated value the GPU would compute with while the emulator uses the real one.
        for &scalar in scalars {
            let value = i32::try_from(scalar).with_context(|| {
                format!("the scalar argument {scalar} does not fit the kernel's 32-bit `int`")
            })?;
            args.push(LaunchArg::I32(value));
        }
        args.extend(maps.iter().map(LaunchArg::TensorMap));
        let timing = device
            .time_launches(&kernel, grid, block, shared, &args, repetitions)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        seconds += timing.median_ms / 1e3;
    }
    Ok((seconds, compile_seconds))
}

/// The `// Launch: grid (X, Y, Z), block (...), N bytes of dynamic shared memory.` line of a CUDA
/// file's leading comments, as `tilec build --emit cuda` prints it.
fn launch_header(text: &str) -> Option<&str> {
    text.lines()
        .take_while(|line| line.starts_with("//"))
        .find(|line| line.starts_with("// Launch:"))
}

/// The dynamic shared memory a CUDA file's launch header asks for.
fn declared_shared_bytes(text: &str) -> Option<u32> {
    let before = launch_header(text)?.strip_suffix(" bytes of dynamic shared memory.")?;
    before.rsplit(' ').next()?.parse().ok()
}

/// How a CUDA file's launch header says its blocks cover the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeclaredLaunch {
    /// `grid (X, Y, Z)`: these blocks, one per tile.
    Grid([u32; 3]),
    /// `persistent: one block per multiprocessor walking the tiles of grid (X, Y, Z)`: the
    /// kernel walks these tiles itself, from as many blocks as fit at once.
    Persistent { tiles: [u32; 3] },
}

/// The launch a CUDA file's header declares, as tilec prints it for either kind of program.
fn declared_launch(text: &str) -> Option<DeclaredLaunch> {
    let header = launch_header(text)?;
    if let Some(after) = header.strip_prefix("// Launch: grid (") {
        return grid_extents(after).map(DeclaredLaunch::Grid);
    }
    let after = header
        .strip_prefix("// Launch: persistent: ")?
        .split_once("walking the tiles of grid (")?
        .1;
    grid_extents(after).map(|tiles| DeclaredLaunch::Persistent { tiles })
}

/// `X, Y, Z)` at the start of `text`.
fn grid_extents(text: &str) -> Option<[u32; 3]> {
    let inside = text.split_once(')')?.0;
    let mut extents = inside.split(',').map(|e| e.trim().parse::<u32>().ok());
    let grid = [extents.next()??, extents.next()??, extents.next()??];
    extents.next().is_none().then_some(grid)
}

/// The program's TMA tensor maps, each encoded over the uploaded tensor of the parameter whose
/// buffer it describes (`uploaded` holds one tensor per parameter, in order).
fn encode_tensor_maps<'t>(
    device: &CudaDevice,
    program: &ThreadProgram,
    uploaded: &'t [DeviceTensor],
) -> Result<Vec<EncodedTensorMap<'t>>> {
    let encode = |map: &tilec_ir::thread::TensorMap| {
        let k = program
            .params
            .iter()
            .position(|param| param.buffer == map.buffer)
            .with_context(|| format!("tensor map `{}` describes no tensor parameter", map.name))?;
        let tensor = uploaded
            .get(k)
            .with_context(|| format!("tensor map `{}` has no uploaded tensor", map.name))?;
        device
            .encode_tensor_map(map, tensor, &program.params[k].name)
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    program.tensor_maps.iter().map(encode).collect()
}

/// Threads in all of one launch: what the emulator's time grows with.
pub(crate) fn launch_threads(program: &ThreadProgram, scalars: &[i64]) -> Result<i64> {
    let grid = launch_grid(program, scalars)?;
    Ok(grid.iter().map(|&g| i64::from(g)).product::<i64>() * program.threads())
}

fn launch_grid(program: &ThreadProgram, scalars: &[i64]) -> Result<[u32; 3]> {
    let env = |var| {
        program
            .scalars
            .iter()
            .position(|s| s.var == var)
            .and_then(|k| scalars.get(k).copied())
    };
    let mut grid = [1u32; 3];
    for (slot, &extent) in grid.iter_mut().zip(&program.grid) {
        let value = program
            .exprs
            .eval(extent, &env)
            .context("the grid does not evaluate")?;
        *slot = u32::try_from(value).context("the grid extent is out of range")?;
    }
    Ok(grid)
}

fn report(
    out: &mut impl Write,
    describe: &str,
    where_: &str,
    program: &ThreadProgram,
    tensors: &[HostTensor],
    seconds: f64,
    bench: bool,
) -> Result<()> {
    let bytes = inputs::bytes_moved(program, tensors) as f64;
    let what = if bench {
        "median of 50 launches"
    } else {
        "one launch"
    };
    writeln!(
        out,
        "ran {describe} on {where_}: {} ({what}), {} moved",
        format_seconds(seconds),
        format_rate(bytes / seconds.max(1e-12))
    )?;
    Ok(())
}

/// Bytes per second in the unit that keeps a few digits (the emulator moves MB/s, a GPU TB/s).
fn format_rate(bytes_per_second: f64) -> String {
    if bytes_per_second >= 1e9 {
        format!("{:.1} GB/s", bytes_per_second / 1e9)
    } else {
        format!("{:.1} MB/s", bytes_per_second / 1e6)
    }
}

/// A run time with at least four significant digits from 100 µs up: GPU timings of milliseconds
/// differ by tenths of a percent between the variants one compares, so two decimals of a
/// millisecond (0.5 % at 2 ms) are too coarse.
fn format_seconds(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.3} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

/// What comparing a GPU run with the emulator found.
#[derive(Debug)]
pub(crate) enum CheckVerdict {
    /// Every written tensor matches; the comparisons, one line per tensor.
    Matches(Vec<String>),
    /// A written tensor differs: every comparison so far, the failing one last.
    Differs(Vec<String>),
    /// The launch is too large for the emulator; why.
    Skipped(String),
}

/// `--check`: runs the emulator on the same inputs (when the launch is small enough) and compares
/// every written tensor with what the GPU wrote.
pub(crate) fn check_against_emulator(
    programs: &[ThreadProgram],
    scalars: &[i64],
    tensors: Vec<HostTensor>,
    gpu: &[HostTensor],
) -> Result<CheckVerdict> {
    check_within(programs, scalars, tensors, gpu, None)
}

/// [`check_against_emulator`] with the emulator stopped after `budget`, in which case the check
/// is skipped with why (`tilec watch`, which must stay responsive).
pub(crate) fn check_within(
    programs: &[ThreadProgram],
    scalars: &[i64],
    mut tensors: Vec<HostTensor>,
    gpu: &[HostTensor],
    budget: Option<Duration>,
) -> Result<CheckVerdict> {
    let program = first_program(programs)?;
    let size = launch_threads(program, scalars)?;
    if size > CHECK_LIMIT_THREADS {
        return Ok(CheckVerdict::Skipped(format!(
            "{size} threads in all is too many for the emulator (limit {CHECK_LIMIT_THREADS})"
        )));
    }
    let started = Instant::now();
    let mut undefined = vec![Vec::new(); tensors.len()];
    for program in programs {
        let left = budget.map(|budget| budget.saturating_sub(started.elapsed()));
        match run_program_within(program, &mut tensors, scalars, left) {
            Ok(ran) => {
                for (elements, order) in undefined.iter_mut().zip(ran.block_order) {
                    elements.extend(order.elements);
                }
            }
            Err(error) if matches!(error.kind, ErrorKind::OutOfTime { .. }) => {
                let budget = budget.unwrap_or_default();
                return Ok(CheckVerdict::Skipped(crate::watch::over_budget(budget)));
            }
            Err(error) => bail!("emulator: {error}"),
        }
    }
    let mut lines = Vec::new();
    for (index, (param, (emulated, actual))) in program
        .params
        .iter()
        .zip(tensors.iter().zip(gpu))
        .enumerate()
    {
        if param.access == tilec_ir::thread::ParamAccess::Read {
            continue;
        }
        // Elements two blocks stored different values to are undefined on the GPU: the GPU's
        // value stands for the emulator's there.
        let undefined = undefined.get(index).map_or(&[][..], Vec::as_slice);
        let mut emulated = std::borrow::Cow::Borrowed(emulated);
        if !undefined.is_empty() {
            let emulated = emulated.to_mut();
            for &element in undefined {
                if let (Some(slot), Some(&value)) =
                    (emulated.values.get_mut(element), actual.values.get(element))
                {
                    *slot = value;
                }
            }
        }
        let excluded = undefined.len();
        let comparison = compare(actual, &emulated);
        let matches = comparison.passes(tolerance_in(program, actual.dtype));
        let verdict = if matches { "matches" } else { "DIFFERS FROM" };
        let note = if excluded > 0 {
            format!(
                " ({excluded} element(s) two blocks stored different values to are undefined \
                 and not compared)"
            )
        } else {
            String::new()
        };
        lines.push(format!(
            "GPU `{}` {verdict} the emulator: {comparison}{note}",
            param.name
        ));
        if !matches {
            return Ok(CheckVerdict::Differs(lines));
        }
    }
    Ok(CheckVerdict::Matches(lines))
}

/// Warns about the elements of each tensor two blocks of `program` stored different values to:
/// blocks run in no fixed order on a GPU, so those elements are undefined there.
fn warn_block_order(program: &ThreadProgram, block_order: &[tilec_runtime::BlockOrder]) {
    for (param, order) in program.params.iter().zip(block_order) {
        let Some((element, earlier, later)) = order.first else {
            continue;
        };
        eprintln!(
            "warning: emulator: {} element(s) of `{}` were stored with different values by two \
             blocks (first `{}[{element}]`: {earlier} in an earlier block, {later} in a later \
             one); blocks run in no fixed order on a GPU, so these elements are undefined there \
             (a kernel that computes where it writes from index tensors may be sent to one \
             position twice by its inputs: pass inputs that do not with --input)",
            order.elements.len(),
            param.name,
            param.name
        );
    }
}

/// Prints a `--check` verdict; a difference is an error.
fn print_check(out: &mut impl Write, verdict: &CheckVerdict) -> Result<()> {
    match verdict {
        CheckVerdict::Skipped(why) => {
            writeln!(out, "check skipped: {why}; pass smaller sizes with --with")?;
        }
        CheckVerdict::Matches(lines) | CheckVerdict::Differs(lines) => {
            for line in lines {
                writeln!(out, "check: {line}")?;
            }
        }
    }
    if matches!(verdict, CheckVerdict::Differs(_)) {
        bail!("the GPU result differs from the emulator");
    }
    Ok(())
}

/// The seeded inputs of a launch, filled within `budget` (from now) when there is one.
fn input_tensors(
    program: &ThreadProgram,
    scalars: &[i64],
    (seed, on_gpu): (u64, bool),
    budget: Option<Duration>,
) -> Result<Vec<HostTensor>> {
    let deadline = budget.map(|budget| Instant::now() + budget);
    match inputs::make_tensors_before(program, scalars, (seed, on_gpu), deadline) {
        Ok(tensors) => Ok(tensors),
        Err(RandomError::OutOfTime) => bail!(
            "emulator: stopped after its time budget of {} s while filling the inputs (not \
             finished, not necessarily wrong); pass smaller sizes with --with",
            budget.unwrap_or_default().as_secs_f64()
        ),
        Err(RandomError::TooLarge(message)) => bail!(message),
    }
}

/// Replaces the tensors `--input` names with the files' contents, rounded to each parameter's
/// dtype; a name that is no parameter, or a file of another shape, is an error that says so.
fn read_inputs(
    inputs: &[(String, PathBuf)],
    program: &ThreadProgram,
    tensors: &mut [HostTensor],
) -> Result<()> {
    for (name, path) in inputs {
        let Some(position) = program.params.iter().position(|param| param.name == *name) else {
            let names: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
            bail!(
                "--input {name}: the kernel has no tensor parameter `{name}` (it has {})",
                names.join(", ")
            );
        };
        let file = npy::read_npy(path)
            .with_context(|| format!("--input {name}: cannot read {}", path.display()))?;
        let Some(slot) = tensors.get_mut(position) else {
            bail!("--input {name}: the parameter has no tensor");
        };
        if file.shape != slot.shape {
            bail!(
                "--input {name}: {} has shape {:?}, the parameter {:?}",
                path.display(),
                file.shape,
                slot.shape
            );
        }
        let dtype = slot.dtype;
        slot.values = file
            .values
            .iter()
            .map(|&value| tilec_runtime::tensor::round_to(dtype, value))
            .collect();
    }
    Ok(())
}

fn save_tensors(dir: &Path, program: &ThreadProgram, tensors: &[HostTensor]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (param, tensor) in program.params.iter().zip(tensors) {
        let path = dir.join(format!("{}.npy", param.name));
        npy::write_npy(&path, tensor)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{DeclaredLaunch, declared_launch, declared_shared_bytes};

    /// `--check` compares every element but those two blocks stored different values to: there
    /// the GPU's value is as good as any. Here blocks 1 and 2 both write row 1; a "GPU" result
    /// that keeps block 1's row matches, and one that differs elsewhere does not.
    #[test]
    fn the_check_leaves_out_elements_two_blocks_stored_differently() {
        use tilec_ir::DType;
        use tilec_runtime::HostTensor;

        let source = "import tilelang\nimport tilelang.language as T\n\n\n\
            @tilelang.jit\ndef scatter(B=4, N=8):\n    @T.prim_func\n    def main(X: T.Tensor((B, N), \"float32\"), \
            Pos: T.Tensor((B,), \"int32\"), Y: T.Tensor((B, N), \"float32\")):\n        \
            with T.Kernel(B, threads=32) as bx:\n            for j in T.Parallel(N):\n                \
            Y[Pos[bx], j] = X[bx, j]\n\n    return main\n\n\nscatter()\n";
        let db = tilec_db::RootDatabase::default();
        let file =
            tilec_db::SourceFile::new(&db, "scatter.py".into(), source.to_owned(), Vec::new());
        let instance = tilec_db::instances(&db, file)[0];
        let programs = tilec_db::thread_programs(&db, instance)
            .as_ref()
            .clone()
            .expect("lowers");
        let x: Vec<f64> = (0..32).map(f64::from).collect();
        let inputs = vec![
            HostTensor {
                dtype: DType::Float32,
                shape: vec![4, 8],
                values: x.clone(),
            },
            HostTensor {
                dtype: DType::Int32,
                shape: vec![4],
                values: vec![0.0, 1.0, 1.0, 3.0],
            },
            HostTensor::zeros(DType::Float32, &[4, 8]),
        ];
        // Row 0 from block 0, row 1 from block 1 (the emulator keeps block 2's), row 3 from
        // block 3; row 2 stays zero.
        let mut y = vec![0.0; 32];
        for (row, block) in [(0, 0), (1, 1), (3, 3)] {
            y[row * 8..row * 8 + 8].copy_from_slice(&x[block * 8..block * 8 + 8]);
        }
        let mut gpu = inputs.clone();
        gpu[2].values = y.clone();
        let verdict =
            super::check_against_emulator(&programs, &[], inputs.clone(), &gpu).expect("checks");
        let super::CheckVerdict::Matches(lines) = verdict else {
            panic!("the rows two blocks wrote are not compared: {verdict:?}");
        };
        assert!(
            lines.iter().any(|line| line.contains(
                "(8 element(s) two blocks stored different values to are undefined and not \
                 compared)"
            )),
            "{lines:?}"
        );
        gpu[2].values[0] += 1.0;
        let verdict = super::check_against_emulator(&programs, &[], inputs, &gpu).expect("checks");
        assert!(
            matches!(verdict, super::CheckVerdict::Differs(_)),
            "{verdict:?}"
        );
    }

    #[test]
    fn run_times_keep_four_significant_digits() {
        assert_eq!(super::format_seconds(1.9742e-3), "1.974 ms");
        assert_eq!(super::format_seconds(503.46e-6), "503.5 µs");
        assert_eq!(super::format_seconds(2.5), "2.50 s");
    }

    #[test]
    fn a_replacement_declares_its_shared_memory_in_the_launch_header() {
        let header = "// Generated by tilec for sm_90: kernel `k`.\n\
            // Launch: grid (32, 16, 8), block (384, 1, 1), 163904 bytes of dynamic shared memory.\n\
            extern \"C\" __global__ void k() {}\n";
        assert_eq!(declared_shared_bytes(header), Some(163_904));
        assert_eq!(
            declared_shared_bytes("extern \"C\" __global__ void k() {}"),
            None
        );
        let edited = "// Launch: grid (1, 1, 1), block (32, 1, 1), lots of shared memory.\n";
        assert_eq!(declared_shared_bytes(edited), None);
    }

    #[test]
    fn a_replacement_declares_its_grid_in_the_launch_header() {
        let persistent = "// Generated by tilec for sm_90: kernel `k`.\n\
            // Launch: grid (132, 1, 1), block (384, 1, 1), 215104 bytes of dynamic shared memory.\n";
        assert_eq!(
            declared_launch(persistent),
            Some(DeclaredLaunch::Grid([132, 1, 1]))
        );
        assert_eq!(
            declared_launch("// Launch: grid (4, 2), block (32, 1, 1)."),
            None
        );
        assert_eq!(
            declared_launch("// Launch: grid (4, x, 1), block (32, 1, 1)."),
            None
        );
        assert_eq!(declared_launch("extern \"C\" __global__ void k() {}"), None);
        // A persistent program's header names its tiles: a per-block program launching such a
        // file starts one block per multiprocessor instead of one per tile.
        let walking = "// Launch: persistent: one block per multiprocessor walking the tiles of \
            grid (32, 64, 1), block (384, 1, 1), 215104 bytes of dynamic shared memory.\n";
        assert_eq!(
            declared_launch(walking),
            Some(DeclaredLaunch::Persistent { tiles: [32, 64, 1] })
        );
        assert_eq!(declared_shared_bytes(walking), Some(215_104));
        let garbled = "// Launch: persistent: one block per multiprocessor walking the tiles of \
            grid (32, 64), block (384, 1, 1).\n";
        assert_eq!(declared_launch(garbled), None);
    }
}

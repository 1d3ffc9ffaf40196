//! The CUDA backend: opens the GPU through cudarc, compiles CUDA C with NVRTC (once per source and
//! target in each process), moves [`HostTensor`]s to and from the device, encodes TMA tensor maps
//! over device tensors, launches kernels and times them with CUDA events.
//!
//! Nothing here links against CUDA. cudarc loads `libcuda` and `libnvrtc` at run time, so the crate
//! builds and its tests pass on a machine without either. cudarc panics (instead of returning an error)
//! when it first needs a library that is absent, so [`CudaDevice::open_ordinal`] (and `open`, `count`
//! and `list`) check for both libraries before any other call, and every public entry point runs
//! under `catch_unwind` as a second guard (a driver older than the bindings also panics, on the first
//! call of a function it lacks). A missing GPU is therefore always a value, [`Unavailable`], and a
//! failed compile or launch is a [`CompileFailure`] or a [`CudaError`].

// The workspace denies unsafe code; this module is the one place that talks to the driver and NVRTC.
// Every unsafe block says why it holds.
#![allow(unsafe_code)]

use std::any::Any;
use std::ffi::{CString, c_char, c_void};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{
    CUdevice_attribute, CUevent_flags, CUfunction_attribute, CUresult, CUtensorMap,
    CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use dashmap::DashMap;
use tilec_ir::thread::{DescriptorSwizzle, TensorMap};
use tilec_ir::{DType, Target};

use crate::tensor::{HostTensor, element_bytes, storage_bytes};

/// Dynamic shared memory a block may use without opting in through a function attribute.
const DEFAULT_DYNAMIC_SHARED_BYTES: u32 = 48 * 1024;

/// Why the GPU cannot be used. The caller decides what to do instead (usually: run the CPU emulator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// No `libcuda.so` could be loaded: the NVIDIA driver is not installed (or not visible).
    NoDriverLibrary,
    /// No `libnvrtc.so` could be loaded: the CUDA toolkit's runtime compiler is missing.
    NoNvrtcLibrary,
    /// The driver loaded but reports no CUDA device.
    NoDevice,
    /// A device was asked for by an ordinal the host does not have (it has `count`, numbered from
    /// 0).
    NoSuchDevice { ordinal: usize, count: usize },
    /// The driver loaded but failed while opening a device or reading what it is; `during` names
    /// the device ("opening device 1").
    Driver { during: String, error: String },
    /// cudarc panicked while opening the device (for example a driver older than the bindings).
    Panicked(String),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NoDriverLibrary => {
                f.write_str("no CUDA driver library found (libcuda.so could not be loaded)")
            }
            Unavailable::NoNvrtcLibrary => f.write_str(
                "no NVRTC library found (libnvrtc.so could not be loaded; it comes with the CUDA toolkit)",
            ),
            Unavailable::NoDevice => f.write_str("the CUDA driver found no GPU"),
            Unavailable::NoSuchDevice { ordinal, count } => write!(
                f,
                "there is no device {ordinal}: the CUDA driver found {count} GPU(s), numbered from 0"
            ),
            Unavailable::Driver { during, error } => {
                write!(f, "the CUDA driver failed while {during}: {error}")
            }
            Unavailable::Panicked(message) => {
                write!(f, "the CUDA bindings failed while opening the GPU: {message}")
            }
        }
    }
}

impl std::error::Error for Unavailable {}

/// A failed driver call on an open device: what was being done and what the driver said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaError {
    /// What was being done, as a phrase ("running kernel `gemm`").
    pub during: String,
    /// The driver's error name and description, or our own explanation.
    pub message: String,
}

impl CudaError {
    fn new(during: impl Into<String>, message: impl Into<String>) -> CudaError {
        CudaError {
            during: during.into(),
            message: message.into(),
        }
    }

    /// Turns a driver error into a `CudaError`; used as `map_err(CudaError::driver("..."))`.
    fn driver(during: impl Into<String>) -> impl FnOnce(DriverError) -> CudaError {
        let during = during.into();
        move |error| CudaError {
            during,
            message: describe_driver_error(error),
        }
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CUDA error while {}: {}", self.during, self.message)
    }
}

impl std::error::Error for CudaError {}

/// A kernel that could not be compiled or loaded. `log` is NVRTC's log, verbatim, so that diagnostics
/// can quote the compiler's own lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileFailure {
    /// One sentence saying what failed.
    pub message: String,
    /// NVRTC's program log (empty when the failure happened before or after NVRTC ran).
    pub log: String,
    /// The NVRTC options the source was compiled with.
    pub options: Vec<String>,
}

impl CompileFailure {
    fn before_nvrtc(message: impl Into<String>) -> CompileFailure {
        CompileFailure {
            message: message.into(),
            log: String::new(),
            options: Vec::new(),
        }
    }
}

impl fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if !self.log.trim().is_empty() {
            write!(f, "\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for CompileFailure {}

/// How one source is compiled: the target architecture plus what TileLang-generated code may need
/// (header directories, extra flags).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileSettings {
    /// A real architecture such as `"sm_90"` (NVRTC then also produces a cubin and runs ptxas).
    pub arch: String,
    pub include_paths: Vec<String>,
    pub extra_options: Vec<String>,
}

impl CompileSettings {
    pub fn for_arch(arch: &str) -> CompileSettings {
        CompileSettings {
            arch: arch.to_string(),
            include_paths: Vec::new(),
            extra_options: Vec::new(),
        }
    }

    /// The NVRTC command line for these settings.
    ///
    /// `--use_fast_math` is deliberately absent: results must follow IEEE division, square root and
    /// denormals so that they match the CPU emulator. `-lineinfo` keeps source lines in the code for
    /// profilers and sanitizers at no run-time cost, and `-Xptxas -v` makes ptxas report registers,
    /// spills and shared memory into the log (see [`CompiledKernel::ptxas_info`]).
    pub fn nvrtc_options(&self) -> Vec<String> {
        // Hopper's wgmma (and setmaxnreg) exist only in the architecture-specific `sm_90a`, whose
        // code runs on every 9.0 device; the generated code for sm_90 may use them.
        let arch = match self.arch.as_str() {
            "sm_90" => "sm_90a",
            other => other,
        };
        let mut options = vec![
            format!("--gpu-architecture={arch}"),
            "-std=c++17".to_string(),
            "-lineinfo".to_string(),
            "--ptxas-options=-v".to_string(),
        ];
        options.extend(
            self.include_paths
                .iter()
                .map(|path| format!("--include-path={path}")),
        );
        options.extend(self.extra_options.iter().cloned());
        options
    }
}

/// PTX for one source, compiled without a device (`tilec build --emit ptx`).
#[derive(Clone, Debug)]
pub struct CompiledPtx {
    pub ptx: String,
    /// NVRTC's log: warnings, and ptxas's register and spill report for a real architecture.
    pub log: String,
}

impl CompiledPtx {
    /// The ptxas lines of the log (registers, spills, shared memory per function), when present.
    pub fn ptxas_info(&self) -> Option<String> {
        ptxas_lines(&self.log)
    }
}

/// The version of the NVRTC library that would compile, or `None` when there is none.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    // SAFETY: as in `compile_ptx`, this only probes for the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return None;
    }
    guarded(
        |_| (),
        || {
            let (mut major, mut minor) = (0, 0);
            // SAFETY: the library is present, and both pointers are valid places for an int.
            let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
            status.result().map(|()| (major, minor)).map_err(|_| ())
        },
    )
    .ok()
}

/// Compiles `source` with NVRTC for `settings` without touching a GPU: only `libnvrtc` is needed.
/// A missing library or a compile error becomes a [`CompileFailure`], never a panic.
pub fn compile_ptx(
    source: &str,
    settings: &CompileSettings,
) -> Result<CompiledPtx, CompileFailure> {
    // SAFETY: `is_culib_present` only tries to dlopen the candidate library names and closes them
    // again; it calls no function of the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(CompileFailure::before_nvrtc(
            Unavailable::NoNvrtcLibrary.to_string(),
        ));
    }
    let panicked = |message| CompileFailure::before_nvrtc(format!("NVRTC failed: {message}"));
    guarded(panicked, || {
        check_compile_inputs(source, "kernel", settings)?;
        let options = settings.nvrtc_options();
        let slot = image_cache()
            .entry(cache_key(source, &options))
            .or_default()
            .clone();
        let image = slot.get_or_init(|| run_nvrtc(source, &options)).clone()?;
        Ok(CompiledPtx {
            ptx: image.ptx.clone(),
            log: image.log.clone(),
        })
    })
}

/// Whether the CUDA compute cache is turned off for this process (`CUDA_CACHE_DISABLE=1`), so that
/// every NVRTC compilation runs ptxas and its log carries the register and spill report (see
/// [`CompiledKernel::ptxas_info`]).
pub fn compute_cache_disabled() -> bool {
    std::env::var("CUDA_CACHE_DISABLE").is_ok_and(|value| value.trim() == "1")
}

/// The lines of an NVRTC log that ptxas wrote.
fn ptxas_lines(log: &str) -> Option<String> {
    let lines: Vec<&str> = log
        .lines()
        .filter(|line| line.trim_start().starts_with("ptxas"))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// What NVRTC produced for one (source, options) pair; independent of any device context.
#[derive(Debug)]
struct CompiledImage {
    ptx: String,
    /// Present when the target is a real architecture; loading it skips the driver's PTX JIT.
    cubin: Option<Vec<u8>>,
    log: String,
}

type ImageSlot = Arc<OnceLock<Result<Arc<CompiledImage>, CompileFailure>>>;

/// The process-wide NVRTC cache, keyed by a hash of (source, options). Each key holds a `OnceLock`, so
/// two threads asking for the same source wait for one compilation instead of running two, while
/// different sources compile in parallel. Failures are cached too: the same source fails the same way.
fn image_cache() -> &'static DashMap<u64, ImageSlot> {
    static CACHE: OnceLock<DashMap<u64, ImageSlot>> = OnceLock::new();
    CACHE.get_or_init(DashMap::new)
}

/// How many times NVRTC actually ran in this process (cache hits do not count).
static NVRTC_RUNS: AtomicUsize = AtomicUsize::new(0);

/// The number of NVRTC compilations this process has run; a cache hit leaves it unchanged.
pub fn nvrtc_compilations() -> usize {
    NVRTC_RUNS.load(Ordering::Relaxed)
}

/// A kernel function loaded on a device, with what the compiler said about it.
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    name: String,
    arch: String,
    function: CudaFunction,
    image: Arc<CompiledImage>,
    /// Launched with `cuLaunchCooperativeKernel`, which a grid barrier needs.
    cooperative: bool,
}

impl CompiledKernel {
    /// The kernel, to be launched cooperatively when `cooperative` is set: every block resident
    /// at once, as a program with a grid-wide barrier (`T.sync_grid`) needs. Each launch then
    /// checks first that the grid fits on the device at once.
    pub fn with_cooperative_launch(mut self, cooperative: bool) -> CompiledKernel {
        self.cooperative = cooperative;
        self
    }

    pub fn is_cooperative(&self) -> bool {
        self.cooperative
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The PTX NVRTC generated (for `--emit ptx` and for reading).
    pub fn ptx(&self) -> &str {
        &self.image.ptx
    }

    /// NVRTC's full log of the successful compile: warnings and the ptxas report.
    pub fn log(&self) -> &str {
        &self.image.log
    }

    /// The `ptxas info` lines of the log (registers, spills, shared memory per kernel), when ptxas
    /// ran for this compile.
    ///
    /// NVRTC from CUDA 13 on keeps ptxas results in the CUDA compute cache (`~/.nv/ComputeCache`,
    /// keyed by the PTX), and a cache hit leaves the log empty; `CUDA_CACHE_DISABLE=1` makes ptxas
    /// run (and report) every time. [`CompiledKernel::resources`] is always available.
    pub fn ptxas_info(&self) -> Option<String> {
        ptxas_lines(&self.image.log)
    }

    /// What the loaded function uses, as the driver reports it; `None` if the driver fails to say.
    pub fn resources(&self) -> Option<KernelResources> {
        guarded(
            |_| (),
            || {
                let function = &self.function;
                Ok(KernelResources {
                    registers: function.num_regs().map_err(|_| ())?,
                    local_bytes: function.local_size_bytes().map_err(|_| ())?,
                    static_shared_bytes: function.shared_size_bytes().map_err(|_| ())?,
                    max_threads_per_block: function.max_threads_per_block().map_err(|_| ())?,
                })
            },
        )
        .ok()
    }
}

/// Per-kernel resource use, from the driver's function attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: i32,
    /// Local memory per thread in bytes; nonzero usually means register spills.
    pub local_bytes: i32,
    /// Statically declared shared memory per block in bytes.
    pub static_shared_bytes: i32,
    /// The most threads a block of this kernel may have (registers can make it less than 1024).
    pub max_threads_per_block: i32,
}

/// A tensor in device memory, stored as raw bytes in the layout [`HostTensor::to_bytes`] produces.
#[derive(Debug)]
pub struct DeviceTensor {
    dtype: DType,
    shape: Vec<usize>,
    byte_len: usize,
    /// At least one byte long: the driver refuses empty allocations, so empty tensors get a pad byte.
    data: CudaSlice<u8>,
}

impl DeviceTensor {
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Size of the elements in bytes (without the pad byte of an empty tensor).
    pub fn byte_len(&self) -> usize {
        self.byte_len
    }
}

/// One kernel argument: a tensor is passed as its device pointer, a scalar and a tensor map by
/// value. Kernels printed from a thread program take tensors, then scalars, then tensor maps.
#[derive(Clone, Copy, Debug)]
pub enum LaunchArg<'a> {
    Tensor(&'a DeviceTensor),
    I32(i32),
    TensorMap(&'a EncodedTensorMap<'a>),
}

/// A TMA tensor map the driver encoded over one device tensor ([`CudaDevice::encode_tensor_map`]),
/// for a kernel's `const __grid_constant__ tl_tensor_map` parameter. It holds the tensor's device
/// address, so it borrows the tensor: the map cannot outlive the memory it describes.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct EncodedTensorMap<'a> {
    map: CUtensorMap,
    tensor: PhantomData<&'a DeviceTensor>,
}

// SAFETY: `DeviceRepr` promises that a value's bytes are what the kernel parameter expects. The
// wrapper is transparent over `CUtensorMap`, 128 bytes of plain data that `cuTensorMapEncodeTiled`
// wrote for exactly this use, and the kernel's `tl_tensor_map` is the same 128 bytes (the prelude's
// `struct { unsigned long long opaque[16]; }`, which the launch copies by its size). The device
// address inside stays valid as long as the borrowed tensor lives.
unsafe impl DeviceRepr for EncodedTensorMap<'_> {}

/// The arguments of `cuTensorMapEncodeTiled` for one [`TensorMap`] over one row-major tensor,
/// computed and checked against the driver's rules without the driver, so that a violation gets a
/// message naming the rule instead of a bare `CUDA_ERROR_INVALID_VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapLayout {
    pub data_type: CUtensorMapDataType,
    /// Elements per dimension, innermost first: the tensor's shape reversed.
    pub global_dims: Vec<u64>,
    /// Byte distance between consecutive indices of dimensions 1.., innermost first (one entry
    /// fewer than the rank; dimension 0 is contiguous).
    pub global_strides: Vec<u64>,
    /// Elements per dimension of one box, innermost first.
    pub box_dims: Vec<u32>,
    /// All 1: every element of the box is copied.
    pub element_strides: Vec<u32>,
    pub swizzle: CUtensorMapSwizzle,
}

/// The most dimensions a TMA tensor has.
const TENSOR_MAP_MAX_RANK: usize = 5;

/// The most elements along one dimension of a TMA box.
const TENSOR_MAP_MAX_BOX: u32 = 256;

impl TensorMapLayout {
    /// The layout of `map` over a contiguous row-major tensor of `dtype` and `shape` at device
    /// address `address`, or the driver's rule that it breaks, as a sentence.
    pub fn new(
        map: &TensorMap,
        dtype: DType,
        shape: &[usize],
        address: u64,
    ) -> Result<TensorMapLayout, String> {
        let rank = shape.len();
        if !(1..=TENSOR_MAP_MAX_RANK).contains(&rank) {
            return Err(format!(
                "the tensor has {rank} dimensions, but TMA handles 1 to {TENSOR_MAP_MAX_RANK}"
            ));
        }
        if map.box_dims.len() != rank {
            return Err(format!(
                "the map's box has {} dimensions, but the tensor has {rank}",
                map.box_dims.len()
            ));
        }
        if !address.is_multiple_of(16) {
            return Err(format!(
                "the tensor's device address {address:#x} is not a multiple of 16 bytes"
            ));
        }
        if dtype.is_sub_byte() {
            return Err(format!(
                "TMA copies of {dtype} elements (packed two a byte) are not supported"
            ));
        }
        let element = element_bytes(dtype) as u64;
        let global_dims = tensor_map_dims(shape)?;
        let global_strides = tensor_map_strides(&global_dims, element)?;
        check_box(&map.box_dims, element, map.swizzle)?;
        Ok(TensorMapLayout {
            data_type: tensor_map_data_type(dtype),
            global_dims,
            global_strides,
            box_dims: map.box_dims.clone(),
            element_strides: vec![1; rank],
            swizzle: tensor_map_swizzle(map.swizzle),
        })
    }
}

/// The tensor's dimensions innermost first, each 1 to 2^32 elements as the driver requires.
fn tensor_map_dims(shape: &[usize]) -> Result<Vec<u64>, String> {
    let mut dims = Vec::with_capacity(shape.len());
    for (d, &extent) in shape.iter().rev().enumerate() {
        let extent = u64::try_from(extent).unwrap_or(u64::MAX);
        if !(1..=1 << 32).contains(&extent) {
            return Err(format!(
                "dimension {d} (innermost first) has {extent} elements, but TMA needs 1 to 2^32"
            ));
        }
        dims.push(extent);
    }
    Ok(dims)
}

/// The byte strides of dimensions 1.. of a contiguous tensor, which the driver needs to be
/// multiples of 16 below 2^40.
fn tensor_map_strides(dims: &[u64], element: u64) -> Result<Vec<u64>, String> {
    let mut strides = Vec::with_capacity(dims.len().saturating_sub(1));
    let mut stride = element;
    for d in 1..dims.len() {
        stride = stride.saturating_mul(dims[d - 1]);
        if !stride.is_multiple_of(16) || stride >= 1 << 40 {
            return Err(format!(
                "consecutive indices of dimension {d} (innermost first) are {stride} bytes apart, \
                 but TMA needs a multiple of 16 bytes below 2^40"
            ));
        }
        strides.push(stride);
    }
    Ok(strides)
}

/// Checks the box: 1 to 256 elements per dimension, and an inner dimension whose bytes are a
/// multiple of 16 and fit the swizzle's span (TMA swizzles within rows of that many bytes).
fn check_box(
    box_dims: &[u32],
    element: u64,
    swizzle: Option<DescriptorSwizzle>,
) -> Result<(), String> {
    let outside = box_dims
        .iter()
        .enumerate()
        .find(|(_, extent)| !(1..=TENSOR_MAP_MAX_BOX).contains(*extent));
    if let Some((d, extent)) = outside {
        return Err(format!(
            "box dimension {d} (innermost first) is {extent} elements, but TMA boxes have 1 to \
             {TENSOR_MAP_MAX_BOX}"
        ));
    }
    let inner = box_dims
        .first()
        .map_or(0, |&extent| u64::from(extent) * element);
    if !inner.is_multiple_of(16) {
        return Err(format!(
            "the box's inner dimension is {inner} bytes, but TMA needs a multiple of 16"
        ));
    }
    if let Some(swizzle) = swizzle
        && inner > swizzle.row_bytes().unsigned_abs()
    {
        return Err(format!(
            "the box's inner dimension is {inner} bytes, more than the {}-byte swizzle span",
            swizzle.row_bytes()
        ));
    }
    Ok(())
}

/// The driver's element type for `dtype`. TMA copies bytes without converting them, so the types it
/// has no name for (fp8, bool, 8- and 16-bit integers) travel as unsigned integers of their size.
fn tensor_map_data_type(dtype: DType) -> CUtensorMapDataType {
    use CUtensorMapDataType as T;
    match dtype {
        DType::Float16 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BFloat16 => T::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        // TF32 elements are float32 bit patterns that already hold TF32 values; the copy moves them
        // unchanged.
        DType::Float32 | DType::TFloat32 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        DType::Float64 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        DType::Int32 => T::CU_TENSOR_MAP_DATA_TYPE_INT32,
        DType::UInt32 => T::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        DType::Int64 => T::CU_TENSOR_MAP_DATA_TYPE_INT64,
        DType::UInt64 => T::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        DType::Int16 | DType::UInt16 => T::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        // 4-bit elements never reach a tensor map (`TensorMapLayout::new` refuses them).
        DType::Bool
        | DType::Int8
        | DType::UInt8
        | DType::Float8E4M3
        | DType::Float8E5M2
        | DType::Int4
        | DType::UInt4
        | DType::Float4E2M1 => T::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    }
}

fn tensor_map_swizzle(swizzle: Option<DescriptorSwizzle>) -> CUtensorMapSwizzle {
    use CUtensorMapSwizzle as S;
    match swizzle {
        None => S::CU_TENSOR_MAP_SWIZZLE_NONE,
        Some(DescriptorSwizzle::Bytes32) => S::CU_TENSOR_MAP_SWIZZLE_32B,
        Some(DescriptorSwizzle::Bytes64) => S::CU_TENSOR_MAP_SWIZZLE_64B,
        Some(DescriptorSwizzle::Bytes128) => S::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// Calls `cuTensorMapEncodeTiled` for a checked layout: no interleave, L2 promotion by 256 bytes,
/// out-of-bounds elements read as zero.
fn encode_tiled(layout: &TensorMapLayout, address: u64) -> Result<CUtensorMap, DriverError> {
    let mut map = CUtensorMap { opaque: [0; 16] };
    let rank = u32::try_from(layout.global_dims.len()).unwrap_or(u32::MAX);
    // The address is only stored in the map for the device; the host never dereferences it.
    // Device addresses are 64 bits wide, and the CUDA backend runs on 64-bit hosts only.
    #[allow(clippy::cast_possible_truncation)]
    let address = std::ptr::without_provenance_mut::<c_void>(address as usize);
    // SAFETY: the driver writes 128 bytes into `map`, which has them, and reads `rank` entries of
    // `global_dims`, `box_dims` and `element_strides` and `rank - 1` of `global_strides`, which
    // `TensorMapLayout::new` built with exactly those lengths (rank 1 to 5).
    let status = unsafe {
        cudarc::driver::sys::cuTensorMapEncodeTiled(
            &mut map,
            layout.data_type,
            rank,
            address,
            layout.global_dims.as_ptr(),
            layout.global_strides.as_ptr(),
            layout.box_dims.as_ptr(),
            layout.element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            layout.swizzle,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    status.result().map(|()| map)
}

/// How often [`CudaDevice::time_launches`] runs a kernel: untimed warm-up runs first, then timed ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repetitions {
    /// The fewest untimed launches.
    pub warmup: usize,
    /// Untimed launches go on, each waited for, until the GPU has been kept busy this long. A GPU
    /// that has idled (between processes, or while NVRTC compiled) runs at a lower clock for its
    /// first milliseconds of work, and a median over a few milliseconds would measure that.
    pub warmup_time: Duration,
    pub iterations: usize,
}

/// Kernel times from CUDA events, one event pair around each timed launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Every timed launch, in launch order.
    pub samples_ms: Vec<f64>,
}

impl Timing {
    /// Summarises samples; `None` for no samples.
    pub fn from_samples(samples_ms: Vec<f64>) -> Option<Timing> {
        let mut sorted = samples_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let (&min_ms, &max_ms) = (sorted.first()?, sorted.last()?);
        let middle = sorted.len() / 2;
        let median_ms = if sorted.len() % 2 == 1 {
            sorted[middle]
        } else {
            (sorted[middle - 1] + sorted[middle]) / 2.0
        };
        Some(Timing {
            median_ms,
            min_ms,
            max_ms,
            samples_ms,
        })
    }
}

/// One GPU (by its ordinal), its stream, and the modules loaded into its context.
///
/// A device is `Send + Sync` (asserted below): `tilec tune` hands one to each worker thread, and
/// cudarc makes the device's context current on whichever thread calls it, so the threads of one
/// process can drive several GPUs at once.
#[derive(Debug)]
pub struct CudaDevice {
    context: Arc<CudaContext>,
    /// All work goes to this one stream, so every operation is ordered after the previous one.
    stream: Arc<CudaStream>,
    /// The driver's number for this device (0 to the count less one).
    ordinal: usize,
    name: String,
    compute_capability: (i32, i32),
    /// The opt-in maximum of dynamic shared memory per block.
    max_shared_bytes: u32,
    /// Streaming multiprocessors: how many blocks a persistent program is launched on.
    multiprocessors: u32,
    /// Modules are per context, so they are cached per device, keyed like the NVRTC cache (which
    /// is per process: a source compiles once however many devices load it).
    modules: DashMap<u64, Arc<CudaModule>>,
}

/// Worker threads own devices and share them by reference; a field that is neither `Send` nor
/// `Sync` would break `tilec tune` on several GPUs, so this fails to compile instead.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<CudaDevice>();
};

/// A GPU as the driver lists it, read without opening a context on it (which costs time and
/// device memory), for choosing which GPUs to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: usize,
    /// The marketing name ("NVIDIA H100 80GB HBM3").
    pub name: String,
    pub compute_capability: (i32, i32),
}

/// Whether both libraries cudarc loads are present. cudarc panics on the first call into a
/// library that is absent, so this runs before any other call.
fn check_libraries() -> Result<(), Unavailable> {
    // SAFETY: `is_culib_present` only tries to dlopen the candidate library names and closes them
    // again; it calls no function of the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Unavailable::NoDriverLibrary);
    }
    // SAFETY: as above, for libnvrtc.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Unavailable::NoNvrtcLibrary);
    }
    Ok(())
}

/// Turns a driver error while doing `during` into why the GPU cannot be used: an error that says
/// there is no device is [`Unavailable::NoDevice`], any other keeps the driver's words.
fn unavailable(during: String) -> impl FnOnce(DriverError) -> Unavailable {
    move |error: DriverError| match error.0 {
        CUresult::CUDA_ERROR_NO_DEVICE | CUresult::CUDA_ERROR_INVALID_DEVICE => {
            Unavailable::NoDevice
        }
        _ => Unavailable::Driver {
            during,
            error: describe_driver_error(error),
        },
    }
}

/// How many GPUs the driver reports; an error rather than 0 when the driver says there are none.
fn device_count() -> Result<usize, Unavailable> {
    let count =
        CudaContext::device_count().map_err(unavailable("counting the devices".to_owned()))?;
    match usize::try_from(count) {
        Ok(count) if count > 0 => Ok(count),
        _ => Err(Unavailable::NoDevice),
    }
}

/// The name and compute capability of device `ordinal` (which exists), without a context.
fn gpu_info(ordinal: usize) -> Result<GpuInfo, Unavailable> {
    use cudarc::driver::result::device;

    let during = |what: &str| format!("reading the {what} of device {ordinal}");
    // The driver counted the devices in an int, so every ordinal below the count fits one.
    let number = i32::try_from(ordinal).map_err(|_| Unavailable::Driver {
        during: during("handle"),
        error: "the device number does not fit the driver's int".to_owned(),
    })?;
    let handle = device::get(number).map_err(unavailable(during("handle")))?;
    let name = device::get_name(handle).map_err(unavailable(during("name")))?;
    let attribute = |attribute| {
        // SAFETY: `handle` is a device the driver just returned, and the attribute is one every
        // device has; the driver writes one int, which `get_attribute` provides.
        unsafe { device::get_attribute(handle, attribute) }
            .map_err(unavailable(during("compute capability")))
    };
    let major = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok(GpuInfo {
        ordinal,
        name,
        compute_capability: (major, minor),
    })
}

impl CudaDevice {
    /// Opens device 0, or says why the GPU cannot be used. Never panics.
    pub fn open() -> Result<CudaDevice, Unavailable> {
        CudaDevice::open_ordinal(0)
    }

    /// Opens device `ordinal` (as the driver numbers them, from 0), or says why it cannot be
    /// used; a number the host has no device for is [`Unavailable::NoSuchDevice`]. Never panics.
    pub fn open_ordinal(ordinal: usize) -> Result<CudaDevice, Unavailable> {
        check_libraries()?;
        guarded(Unavailable::Panicked, || {
            let count = device_count()?;
            if ordinal >= count {
                return Err(Unavailable::NoSuchDevice { ordinal, count });
            }
            CudaDevice::open_existing(ordinal)
        })
    }

    /// How many GPUs the driver reports: at least one, or why there is none. Never panics.
    pub fn count() -> Result<usize, Unavailable> {
        check_libraries()?;
        guarded(Unavailable::Panicked, device_count)
    }

    /// Every GPU of the host in the driver's order, with its name and compute capability, read
    /// without opening any of them. Never panics.
    pub fn list() -> Result<Vec<GpuInfo>, Unavailable> {
        check_libraries()?;
        guarded(Unavailable::Panicked, || {
            (0..device_count()?).map(gpu_info).collect()
        })
    }

    /// Opens device `ordinal`, which the driver has counted.
    fn open_existing(ordinal: usize) -> Result<CudaDevice, Unavailable> {
        let fail = |what: &str| unavailable(format!("{what} of device {ordinal}"));
        let context =
            CudaContext::new(ordinal).map_err(unavailable(format!("opening device {ordinal}")))?;
        let name = context.name().map_err(fail("reading the name"))?;
        let compute_capability = context
            .compute_capability()
            .map_err(fail("reading the compute capability"))?;
        let max_shared = context
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(fail("reading the shared memory limit"))?;
        let multiprocessors = context
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(fail("reading the multiprocessor count"))?;
        let stream = context.default_stream();
        Ok(CudaDevice {
            context,
            stream,
            ordinal,
            name,
            compute_capability,
            max_shared_bytes: u32::try_from(max_shared).unwrap_or(DEFAULT_DYNAMIC_SHARED_BYTES),
            multiprocessors: u32::try_from(multiprocessors).unwrap_or(1).max(1),
            modules: DashMap::new(),
        })
    }

    /// The driver's number for this device (what `tilec tune --gpus` names).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's marketing name ("NVIDIA H100 80GB HBM3").
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// The architecture to compile for: `sm_90` on any 9.x device, `sm_80` on any 8.x device, and so
    /// on. Code for `sm_X0` runs on every `X.y` device, and it is what the code generator targets.
    pub fn default_arch(&self) -> String {
        format!("sm_{}0", self.compute_capability.0)
    }

    /// The code generator's target for this device, when it has one.
    pub fn target(&self) -> Option<Target> {
        Target::from_name(&self.default_arch())
    }

    /// The largest dynamic shared memory one block may request, in bytes.
    pub fn max_shared_bytes(&self) -> u32 {
        self.max_shared_bytes
    }

    /// The device's streaming multiprocessors (132 on an H100 SXM or H200).
    pub fn multiprocessors(&self) -> u32 {
        self.multiprocessors
    }

    /// Compiles `source` for `arch` with the default settings and loads `kernel_name` from it.
    pub fn compile(
        &self,
        source: &str,
        kernel_name: &str,
        arch: &str,
    ) -> Result<CompiledKernel, CompileFailure> {
        self.compile_with(source, kernel_name, &CompileSettings::for_arch(arch))
    }

    /// Compiles `source` (once per process for the same source and settings) and loads
    /// `kernel_name`, which must be declared `extern "C" __global__`.
    pub fn compile_with(
        &self,
        source: &str,
        kernel_name: &str,
        settings: &CompileSettings,
    ) -> Result<CompiledKernel, CompileFailure> {
        let panicked = |message| CompileFailure::before_nvrtc(format!("NVRTC failed: {message}"));
        guarded(panicked, || {
            check_compile_inputs(source, kernel_name, settings)?;
            let options = settings.nvrtc_options();
            let key = cache_key(source, &options);
            let slot = image_cache().entry(key).or_default().clone();
            // The shard lock of the map is released here; only callers of this same key wait.
            let image = slot.get_or_init(|| run_nvrtc(source, &options)).clone()?;
            let module = self
                .load_module(key, &image)
                .map_err(|error| CompileFailure {
                    message: format!("the driver could not load the compiled module: {error}"),
                    log: image.log.clone(),
                    options: options.clone(),
                })?;
            let function = module
                .load_function(kernel_name)
                .map_err(|error| CompileFailure {
                    message: if error.0 == CUresult::CUDA_ERROR_NOT_FOUND {
                        format!(
                            "the compiled module has no kernel named `{kernel_name}` \
                         (is it declared extern \"C\" __global__?)"
                        )
                    } else {
                        format!(
                            "could not load kernel `{kernel_name}`: {}",
                            describe_driver_error(error)
                        )
                    },
                    log: image.log.clone(),
                    options,
                })?;
            Ok(CompiledKernel {
                name: kernel_name.to_string(),
                arch: settings.arch.clone(),
                function,
                image,
                cooperative: false,
            })
        })
    }

    fn load_module(&self, key: u64, image: &CompiledImage) -> Result<Arc<CudaModule>, String> {
        if let Some(module) = self.modules.get(&key) {
            return Ok(module.clone());
        }
        let code = match &image.cubin {
            Some(cubin) => Ptx::from_binary(cubin.clone()),
            None => Ptx::from_src(image.ptx.clone()),
        };
        let module = self
            .context
            .load_module(code)
            .map_err(describe_driver_error)?;
        // Two threads may both load the module; the first one stored wins and the other is dropped.
        Ok(self.modules.entry(key).or_insert(module).clone())
    }

    /// Copies a host tensor to the device.
    pub fn upload(&self, tensor: &HostTensor) -> Result<DeviceTensor, CudaError> {
        let during = "copying a tensor to the GPU";
        check_host_tensor(tensor, during)?;
        guarded(panic_error(during), || {
            let bytes = tensor.to_bytes();
            let data = if bytes.is_empty() {
                self.stream.alloc_zeros::<u8>(1)
            } else {
                self.stream.clone_htod(&bytes)
            }
            .map_err(CudaError::driver(during))?;
            Ok(DeviceTensor {
                dtype: tensor.dtype,
                shape: tensor.shape.clone(),
                byte_len: bytes.len(),
                data,
            })
        })
    }

    /// A zero-filled device tensor (for outputs).
    pub fn zeros(&self, dtype: DType, shape: &[usize]) -> Result<DeviceTensor, CudaError> {
        let during = "allocating a tensor on the GPU";
        let byte_len = shape
            .iter()
            .try_fold(1usize, |count, &extent| count.checked_mul(extent))
            .and_then(|count| storage_bytes(dtype, count))
            .ok_or_else(|| CudaError::new(during, format!("the shape {shape:?} is too large")))?;
        guarded(panic_error(during), || {
            let data = self
                .stream
                .alloc_zeros::<u8>(byte_len.max(1))
                .map_err(CudaError::driver(during))?;
            Ok(DeviceTensor {
                dtype,
                shape: shape.to_vec(),
                byte_len,
                data,
            })
        })
    }

    /// Copies a device tensor back into a host tensor of the same dtype and shape.
    pub fn download(&self, tensor: &DeviceTensor) -> Result<HostTensor, CudaError> {
        let during = "copying a tensor from the GPU";
        guarded(panic_error(during), || {
            let mut bytes = self
                .stream
                .clone_dtoh(&tensor.data)
                .map_err(CudaError::driver(during))?;
            // The copy synchronises the stream when it ends, but swallows an error from that wait, so
            // wait again to see it (for example a fault of the kernel that wrote the tensor).
            self.stream
                .synchronize()
                .map_err(CudaError::driver(during))?;
            bytes.truncate(tensor.byte_len);
            HostTensor::from_bytes(tensor.dtype, &tensor.shape, &bytes).ok_or_else(|| {
                CudaError::new(
                    during,
                    "the device buffer does not match the tensor's shape",
                )
            })
        })
    }

    /// Encodes `map` over `tensor`, the device copy of the tensor parameter named `tensor_name`
    /// whose buffer the map describes, for launches that pass it as [`LaunchArg::TensorMap`].
    /// Layouts the driver would refuse are reported with the rule they break.
    pub fn encode_tensor_map<'t>(
        &self,
        map: &TensorMap,
        tensor: &'t DeviceTensor,
        tensor_name: &str,
    ) -> Result<EncodedTensorMap<'t>, CudaError> {
        let during = format!(
            "encoding tensor map `{}` of tensor `{tensor_name}`",
            map.name
        );
        if tensor.data.context() != &self.context {
            return Err(CudaError::new(
                during,
                "the tensor is of another CUDA context",
            ));
        }
        guarded(panic_error(&during), || {
            let (address, _read) = tensor.data.device_ptr(&self.stream);
            let layout = TensorMapLayout::new(map, tensor.dtype, &tensor.shape, address)
                .map_err(|rule| CudaError::new(during.clone(), rule))?;
            self.context
                .bind_to_thread()
                .map_err(CudaError::driver(during.clone()))?;
            let map = encode_tiled(&layout, address).map_err(CudaError::driver(during.clone()))?;
            Ok(EncodedTensorMap {
                map,
                tensor: PhantomData,
            })
        })
    }

    /// Launches `kernel` once and waits for it; a fault in the kernel comes back as a `CudaError`.
    pub fn launch(
        &self,
        kernel: &CompiledKernel,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[LaunchArg<'_>],
    ) -> Result<(), CudaError> {
        let config = self.prepare_launch(kernel, grid, block, shared_bytes, args)?;
        let during = format!("running kernel `{}`", kernel.name);
        guarded(panic_error(&during), || {
            self.enqueue(kernel, config, args)?;
            self.stream
                .synchronize()
                .map_err(CudaError::driver(during.clone()))
        })
    }

    /// Runs `kernel` `warmup` times untimed, then `iterations` times between CUDA event pairs, and
    /// returns the median and minimum of the timed runs.
    pub fn time_launches(
        &self,
        kernel: &CompiledKernel,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[LaunchArg<'_>],
        repetitions: Repetitions,
    ) -> Result<Timing, CudaError> {
        let during = format!("timing kernel `{}`", kernel.name);
        if repetitions.iterations == 0 {
            return Err(CudaError::new(
                during,
                "at least one timed iteration is needed",
            ));
        }
        // Checks and attributes are settled before the loop, so that host work between the start
        // event and the launch stays as small as possible.
        let config = self.prepare_launch(kernel, grid, block, shared_bytes, args)?;
        guarded(panic_error(&during), || {
            self.warm_up(kernel, config, args, repetitions, &during)?;
            let mut events = Vec::with_capacity(repetitions.iterations);
            for _ in 0..repetitions.iterations {
                let record = || {
                    self.stream
                        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                        .map_err(CudaError::driver(during.clone()))
                };
                let start = record()?;
                self.enqueue(kernel, config, args)?;
                events.push((start, record()?));
            }
            self.stream
                .synchronize()
                .map_err(CudaError::driver(during.clone()))?;
            let samples = events
                .iter()
                .map(|(start, end)| start.elapsed_ms(end).map(f64::from))
                .collect::<Result<Vec<f64>, DriverError>>()
                .map_err(CudaError::driver(during.clone()))?;
            Timing::from_samples(samples)
                .ok_or_else(|| CudaError::new(during.clone(), "no launch was timed"))
        })
    }

    /// The untimed launches before a timing: at least `repetitions.warmup`, and for at least
    /// `repetitions.warmup_time` of wall-clock time, each waited for so that the time counts the
    /// GPU's work rather than the host's enqueueing.
    fn warm_up(
        &self,
        kernel: &CompiledKernel,
        config: LaunchConfig,
        args: &[LaunchArg<'_>],
        repetitions: Repetitions,
        during: &str,
    ) -> Result<(), CudaError> {
        let started = Instant::now();
        let mut launched = 0;
        while launched < repetitions.warmup || started.elapsed() < repetitions.warmup_time {
            self.enqueue(kernel, config, args)?;
            launched += 1;
            if repetitions.warmup_time > Duration::ZERO {
                self.stream
                    .synchronize()
                    .map_err(CudaError::driver(during.to_string()))?;
            }
        }
        self.stream
            .synchronize()
            .map_err(CudaError::driver(during.to_string()))
    }

    /// Checks a launch against the device's and the kernel's limits, so that mistakes get a clear
    /// message instead of the driver's bare "invalid argument", and raises the function's
    /// dynamic shared memory limit when the launch needs more than the default 48 KiB.
    fn prepare_launch(
        &self,
        kernel: &CompiledKernel,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[LaunchArg<'_>],
    ) -> Result<LaunchConfig, CudaError> {
        let during = format!("launching kernel `{}`", kernel.name);
        if grid.contains(&0) || block.contains(&0) {
            return Err(CudaError::new(
                during,
                format!("grid {grid:?} and block {block:?} must have no zero extent"),
            ));
        }
        if shared_bytes > self.max_shared_bytes {
            return Err(CudaError::new(
                during,
                format!(
                    "{shared_bytes} bytes of dynamic shared memory requested, but the device allows \
                     at most {} per block",
                    self.max_shared_bytes
                ),
            ));
        }
        for (index, arg) in args.iter().enumerate() {
            if let LaunchArg::Tensor(tensor) = arg
                && tensor.data.context() != &self.context
            {
                return Err(CudaError::new(
                    during,
                    format!("argument {index} is a tensor of another CUDA context"),
                ));
            }
        }
        guarded(panic_error(&during), || {
            let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
            let max_threads = kernel
                .function
                .max_threads_per_block()
                .map_err(CudaError::driver(during.clone()))?;
            if threads > u64::try_from(max_threads).unwrap_or(0) {
                return Err(CudaError::new(
                    during,
                    format!(
                        "block {block:?} has {threads} threads, but the kernel allows at most \
                         {max_threads} (registers per thread limit this)"
                    ),
                ));
            }
            if shared_bytes > DEFAULT_DYNAMIC_SHARED_BYTES {
                // `set_attribute` does not make the context current itself.
                self.context
                    .bind_to_thread()
                    .map_err(CudaError::driver(during.clone()))?;
                let bytes = i32::try_from(shared_bytes).unwrap_or(i32::MAX);
                kernel
                    .function
                    .set_attribute(
                        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        bytes,
                    )
                    .map_err(CudaError::driver(during.clone()))?;
            }
            if kernel.cooperative {
                self.check_co_resident(kernel, grid, (threads, shared_bytes), &during)?;
            }
            Ok(LaunchConfig {
                grid_dim: (grid[0], grid[1], grid[2]),
                block_dim: (block[0], block[1], block[2]),
                shared_mem_bytes: shared_bytes,
            })
        })
    }

    /// A cooperative launch fails unless every block of the grid can be resident at once: says
    /// so with the numbers (blocks per multiprocessor from the occupancy calculator, times the
    /// multiprocessors) instead of the driver's bare error.
    fn check_co_resident(
        &self,
        kernel: &CompiledKernel,
        grid: [u32; 3],
        (threads, shared_bytes): (u64, u32),
        during: &str,
    ) -> Result<(), CudaError> {
        let blocks = grid.iter().map(|&g| u64::from(g)).product::<u64>();
        let per_multiprocessor = kernel
            .function
            .occupancy_max_active_blocks_per_multiprocessor(
                u32::try_from(threads).unwrap_or(u32::MAX),
                shared_bytes as usize,
                None,
            )
            .map_err(CudaError::driver(during.to_owned()))?;
        let resident = u64::from(per_multiprocessor) * u64::from(self.multiprocessors());
        if blocks > resident {
            return Err(CudaError::new(
                during.to_owned(),
                format!(
                    "T.sync_grid needs all {blocks} blocks of the grid resident at once (a \
                     cooperative launch), but this device holds at most {resident}: \
                     {per_multiprocessor} per multiprocessor on {} multiprocessors",
                    self.multiprocessors()
                ),
            ));
        }
        Ok(())
    }

    /// Queues one launch on the stream without waiting for it.
    fn enqueue(
        &self,
        kernel: &CompiledKernel,
        config: LaunchConfig,
        args: &[LaunchArg<'_>],
    ) -> Result<(), CudaError> {
        let mut builder = self.stream.launch_builder(&kernel.function);
        for arg in args {
            match arg {
                LaunchArg::Tensor(tensor) => builder.arg(&tensor.data),
                LaunchArg::I32(value) => builder.arg(value),
                LaunchArg::TensorMap(map) => builder.arg(*map),
            };
        }
        // SAFETY: the driver cannot check argument types, so this relies on the caller: the code
        // generator emits the kernel signature and the argument list from the same parameter list
        // (tensors as pointers, scalars as `int`, tensor maps as 128-byte `tl_tensor_map`s), and
        // out-of-bounds accesses come back as a driver error at the next synchronisation, not as
        // host memory corruption. Every pointer passed, and every tensor a map describes, refers to
        // memory borrowed for the whole call, and `launch`/`time_launches` wait for the stream
        // before returning, so no buffer is freed while the kernel runs.
        let launched = if kernel.cooperative {
            // SAFETY: the same contract as the plain launch below; a cooperative launch only asks
            // the driver to make every block resident at once (checked in `prepare_launch`).
            unsafe { builder.launch_cooperative(config) }
        } else {
            // SAFETY: see above.
            unsafe { builder.launch(config) }
        };
        launched.map(|_| ()).map_err(CudaError::driver(format!(
            "launching kernel `{}`",
            kernel.name
        )))
    }
}

/// Rejects inputs that would make cudarc panic (interior NUL bytes) or that are not a target name, so
/// NVRTC never sees a stray option smuggled in through the architecture.
fn check_compile_inputs(
    source: &str,
    kernel_name: &str,
    settings: &CompileSettings,
) -> Result<(), CompileFailure> {
    if source.contains('\0') {
        return Err(CompileFailure::before_nvrtc(
            "the CUDA source contains a NUL byte",
        ));
    }
    let is_identifier = kernel_name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && kernel_name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !is_identifier {
        return Err(CompileFailure::before_nvrtc(format!(
            "`{kernel_name}` is not a valid kernel name"
        )));
    }
    if !is_architecture_name(&settings.arch) {
        return Err(CompileFailure::before_nvrtc(format!(
            "`{}` is not a GPU architecture (expected a name such as sm_90)",
            settings.arch
        )));
    }
    let options = settings.include_paths.iter().chain(&settings.extra_options);
    if options.clone().any(|option| option.contains('\0')) {
        return Err(CompileFailure::before_nvrtc(
            "an NVRTC option contains a NUL byte",
        ));
    }
    Ok(())
}

/// `sm_90`, `sm_90a`, `compute_80` and the like.
fn is_architecture_name(arch: &str) -> bool {
    let Some(rest) = arch
        .strip_prefix("sm_")
        .or_else(|| arch.strip_prefix("compute_"))
    else {
        return false;
    };
    let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
    !digits.is_empty()
        && digits.len() + 1 >= rest.len()
        && digits.chars().all(|c| c.is_ascii_digit())
}

fn cache_key(source: &str, options: &[String]) -> u64 {
    let mut hasher = DefaultHasher::new();
    source.hash(&mut hasher);
    options.hash(&mut hasher);
    hasher.finish()
}

/// An NVRTC program handle that is destroyed when dropped, on every path out of [`run_nvrtc`].
struct Program {
    raw: cudarc::nvrtc::sys::nvrtcProgram,
    /// NVRTC may keep pointing into the source, so it lives as long as the program.
    _source: CString,
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `create_program` and is destroyed exactly once, here. A failure to
        // destroy leaks the program; there is nothing better to do in `drop`.
        let _ = unsafe { cudarc::nvrtc::result::destroy_program(self.raw) };
    }
}

/// Runs NVRTC on one source. The log is read on success as well, because warnings and the ptxas
/// report are worth showing; that is why this goes below cudarc's `compile_ptx_with_opts`, which
/// returns the log only on failure.
fn run_nvrtc(source: &str, options: &[String]) -> Result<Arc<CompiledImage>, CompileFailure> {
    use cudarc::nvrtc::result;

    NVRTC_RUNS.fetch_add(1, Ordering::Relaxed);
    let failure = |message: String, log: String| CompileFailure {
        message,
        log,
        options: options.to_vec(),
    };
    let source = CString::new(source)
        .map_err(|_| failure("the CUDA source contains a NUL byte".into(), String::new()))?;
    let raw = result::create_program(&source, None).map_err(|error| {
        failure(
            format!("NVRTC could not create a program ({:?})", error.0),
            String::new(),
        )
    })?;
    let program = Program {
        raw,
        _source: source,
    };
    // SAFETY: `program.raw` is a live program (destroyed only when `program` drops, after this
    // function), and no option contains a NUL byte (checked by `check_compile_inputs`; our own options
    // are literals), so `compile_program` cannot panic on building C strings.
    let compiled = unsafe { result::compile_program(program.raw, options) };
    // SAFETY: the program is live, and reading the log is valid after compilation whatever its result.
    let log = unsafe { result::get_program_log(program.raw) }
        .map(|chars| c_chars_to_string(&chars))
        .unwrap_or_default();
    if let Err(error) = compiled {
        return Err(failure(
            format!("NVRTC could not compile the source ({:?})", error.0),
            log,
        ));
    }
    // SAFETY: the program is live and compiled successfully, so its PTX is available.
    let ptx = unsafe { result::get_ptx(program.raw) }
        .map(|chars| c_chars_to_string(&chars))
        .map_err(|error| {
            failure(
                format!("NVRTC produced no PTX ({:?})", error.0),
                log.clone(),
            )
        })?;
    // SAFETY: as above; a cubin exists only for a real architecture, and `get_cubin` handles its
    // absence.
    let cubin = unsafe { get_cubin(program.raw) };
    Ok(Arc::new(CompiledImage { ptx, cubin, log }))
}

/// The cubin of a compiled program, or `None` when NVRTC made none (a virtual architecture).
///
/// # Safety
///
/// `program` must be a live NVRTC program that compiled successfully.
unsafe fn get_cubin(program: cudarc::nvrtc::sys::nvrtcProgram) -> Option<Vec<u8>> {
    use cudarc::nvrtc::sys;

    let mut size = 0usize;
    // SAFETY: `program` is live (the caller's contract) and `size` is a valid place to write to.
    unsafe { sys::nvrtcGetCUBINSize(program, &mut size) }
        .result()
        .ok()?;
    if size == 0 {
        return None;
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has exactly the size NVRTC reported for this program's cubin.
    unsafe { sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast::<c_char>()) }
        .result()
        .ok()?;
    Some(cubin)
}

/// A NUL-terminated C string from NVRTC as text (NVRTC's logs and PTX are ASCII).
fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .map(|&c| u8::from_ne_bytes(c.to_ne_bytes()))
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered`.
fn describe_driver_error(error: DriverError) -> String {
    let name = error
        .error_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", error.0));
    match error.error_string() {
        Ok(text) => format!("{name}: {}", text.to_string_lossy()),
        Err(_) => name,
    }
}

fn host_tensor_mismatch(tensor: &HostTensor) -> Option<String> {
    let count = tensor
        .shape
        .iter()
        .try_fold(1usize, |count, &extent| count.checked_mul(extent));
    (count != Some(tensor.values.len())).then(|| {
        format!(
            "the tensor has {} values but its shape {:?} says otherwise",
            tensor.values.len(),
            tensor.shape
        )
    })
}

fn check_host_tensor(tensor: &HostTensor, during: &str) -> Result<(), CudaError> {
    match host_tensor_mismatch(tensor) {
        Some(message) => Err(CudaError::new(during, message)),
        None => Ok(()),
    }
}

fn panic_error(during: &str) -> impl FnOnce(String) -> CudaError + use<> {
    let during = during.to_string();
    move |message| CudaError::new(during, format!("the CUDA bindings panicked: {message}"))
}

/// Runs `body`, turning a panic inside cudarc into an error made by `on_panic` from the message.
fn guarded<T, E>(
    on_panic: impl FnOnce(String) -> E,
    body: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => Err(on_panic(panic_message(payload.as_ref()))),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_string()
    } else {
        "unknown panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR_ADD: &str = r#"
extern "C" __global__ void vector_add(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"#;

    /// Opens the GPU, or prints why the GPU part of a test is skipped.
    fn device_or_skip(test: &str) -> Option<CudaDevice> {
        match CudaDevice::open() {
            Ok(device) => Some(device),
            Err(why) => {
                eprintln!("{test}: skipping the GPU part, CUDA is unavailable: {why}");
                None
            }
        }
    }

    #[test]
    fn open_is_an_error_without_a_gpu_and_runs_vector_add_with_one() {
        let device = match CudaDevice::open() {
            Ok(device) => device,
            Err(why) => {
                assert!(!why.to_string().is_empty());
                eprintln!("no GPU here ({why}); checked that opening fails cleanly");
                return;
            }
        };
        eprintln!("GPU: {} {:?}", device.name(), device.compute_capability());
        assert!(device.default_arch().starts_with("sm_"));
        let kernel = device
            .compile(VECTOR_ADD, "vector_add", &device.default_arch())
            .expect("vector_add compiles");
        let n = 1000usize;
        let a = HostTensor::random(DType::Float32, &[n], 1);
        let b = HostTensor::random(DType::Float32, &[n], 2);
        let a_dev = device.upload(&a).expect("upload a");
        let b_dev = device.upload(&b).expect("upload b");
        let out_dev = device
            .zeros(DType::Float32, &[n])
            .expect("allocate the output");
        let args = [
            LaunchArg::Tensor(&out_dev),
            LaunchArg::Tensor(&a_dev),
            LaunchArg::Tensor(&b_dev),
            LaunchArg::I32(i32::try_from(n).expect("a small length")),
        ];
        device
            .launch(&kernel, [4, 1, 1], [256, 1, 1], 0, &args)
            .expect("vector_add runs");
        let out = device.download(&out_dev).expect("download the output");
        assert_eq!(out.shape, vec![n]);
        for i in 0..n {
            // The inputs are f32 values, which `as f32` keeps exactly.
            #[allow(clippy::cast_possible_truncation)]
            let expected = f64::from((a.values[i] as f32) + (b.values[i] as f32));
            assert_eq!(out.values[i], expected, "element {i}");
        }
        let timing = device
            .time_launches(
                &kernel,
                [4, 1, 1],
                [256, 1, 1],
                0,
                &args,
                Repetitions {
                    warmup: 2,
                    warmup_time: Duration::from_millis(20),
                    iterations: 5,
                },
            )
            .expect("timing runs");
        assert_eq!(timing.samples_ms.len(), 5);
        assert!(timing.min_ms > 0.0 && timing.min_ms <= timing.median_ms);
        eprintln!(
            "vector_add: median {:.4} ms; {:?}; ptxas: {:?}",
            timing.median_ms,
            kernel.resources(),
            kernel.ptxas_info()
        );
    }

    /// Counting, listing and opening by ordinal agree with one another on a GPU host, and each
    /// is an error, not a panic, without one.
    #[test]
    fn devices_are_counted_listed_and_opened_by_ordinal() {
        let count = match CudaDevice::count() {
            Ok(count) => count,
            Err(why) => {
                assert!(CudaDevice::list().is_err());
                assert!(CudaDevice::open_ordinal(1).is_err());
                eprintln!("no GPU here ({why}); checked that counting and opening fail cleanly");
                return;
            }
        };
        let gpus = CudaDevice::list().expect("the GPUs counted can be listed");
        assert_eq!(gpus.len(), count);
        let last = gpus.last().expect("at least one GPU");
        let device = CudaDevice::open_ordinal(last.ordinal).expect("the last GPU opens");
        assert_eq!(device.ordinal(), last.ordinal);
        assert_eq!(device.name(), last.name);
        assert_eq!(device.compute_capability(), last.compute_capability);
        let missing = CudaDevice::open_ordinal(count).expect_err("one past the last GPU");
        assert_eq!(
            missing,
            Unavailable::NoSuchDevice {
                ordinal: count,
                count
            }
        );
        assert!(missing.to_string().contains(&format!("no device {count}")));
    }

    #[test]
    fn compile_ptx_needs_only_nvrtc_and_fails_cleanly_without_it() {
        let settings = CompileSettings::for_arch("sm_80");
        match compile_ptx(VECTOR_ADD, &settings) {
            Ok(compiled) => {
                assert!(
                    compiled.ptx.contains(".entry vector_add"),
                    "{}",
                    compiled.ptx
                );
                assert!(compiled.ptx.contains(".target sm_80"), "{}", compiled.ptx);
            }
            Err(failure) => {
                // Without libnvrtc the failure says so; with it, this source must compile.
                assert!(failure.message.contains("no NVRTC library"), "{failure}");
                eprintln!("no NVRTC here ({failure}); checked that compiling fails cleanly");
            }
        }
    }

    #[test]
    fn the_same_source_compiles_once() {
        let Some(device) = device_or_skip("the_same_source_compiles_once") else {
            return;
        };
        let source = format!("{VECTOR_ADD}\n// cache test\n");
        let arch = device.default_arch();
        let first = device
            .compile(&source, "vector_add", &arch)
            .expect("first compile");
        let again = device
            .compile(&source, "vector_add", &arch)
            .expect("second compile");
        assert!(
            Arc::ptr_eq(&first.image, &again.image),
            "the second compile must hit the cache"
        );
        assert!(nvrtc_compilations() >= 1);
        assert!(again.ptx().contains("vector_add"));
    }

    #[test]
    fn a_virtual_architecture_loads_through_ptx() {
        let Some(device) = device_or_skip("a_virtual_architecture_loads_through_ptx") else {
            return;
        };
        // NVRTC makes no cubin for a virtual architecture, so the driver JIT-compiles the PTX.
        let arch = format!("compute_{}0", device.compute_capability().0);
        let kernel = device
            .compile(VECTOR_ADD, "vector_add", &arch)
            .expect("vector_add compiles to PTX");
        assert!(kernel.ptx().contains(".entry vector_add"));
        let resources = kernel
            .resources()
            .expect("the driver reports the kernel's resources");
        assert!(resources.registers > 0 && resources.max_threads_per_block >= 256);
        let tensor = HostTensor::random(DType::Float16, &[3, 5], 9);
        let on_device = device.upload(&tensor).expect("upload");
        assert_eq!(device.download(&on_device).expect("download"), tensor);
        let empty = device
            .upload(&HostTensor::zeros(DType::Float32, &[0, 4]))
            .expect("upload");
        assert_eq!(device.download(&empty).expect("download").shape, vec![0, 4]);
    }

    #[test]
    fn a_syntax_error_is_a_compile_failure_with_the_log() {
        let Some(device) = device_or_skip("a_syntax_error_is_a_compile_failure_with_the_log")
        else {
            return;
        };
        let broken = "extern \"C\" __global__ void broken(float* out) { out[0] = 1.0f +; }";
        let failure = device
            .compile(broken, "broken", &device.default_arch())
            .expect_err("a syntax error");
        assert!(failure.log.contains("error"), "{failure}");
        assert!(failure.message.contains("NVRTC"), "{failure}");
        let missing = device
            .compile(VECTOR_ADD, "no_such_kernel", &device.default_arch())
            .expect_err("a missing kernel");
        assert!(missing.message.contains("no_such_kernel"), "{missing}");
    }

    #[test]
    fn large_dynamic_shared_memory() {
        let Some(device) = device_or_skip("large_dynamic_shared_memory") else {
            return;
        };
        // Fills 64 KiB of dynamic shared memory and reads it back, which needs the opt-in attribute.
        let source = r#"
extern "C" __global__ void shared_copy(float* out, int n) {
    extern __shared__ float buffer[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = (float)i;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buffer[n - 1 - i];
}
extern "C" __global__ void fault(float* out) {
    float* wild = (float*)0x10;
    out[0] = *wild;
}
"#;
        let arch = device.default_arch();
        let n = 16 * 1024usize;
        let kernel = device
            .compile(source, "shared_copy", &arch)
            .expect("shared_copy compiles");
        let out = device
            .zeros(DType::Float32, &[n])
            .expect("allocate the output");
        let bytes = u32::try_from(n * 4).expect("64 KiB");
        device
            .launch(
                &kernel,
                [1, 1, 1],
                [256, 1, 1],
                bytes,
                &[
                    LaunchArg::Tensor(&out),
                    LaunchArg::I32(i32::try_from(n).expect("a small length")),
                ],
            )
            .expect("64 KiB of dynamic shared memory can be used");
        let host = device.download(&out).expect("download the output");
        assert!(
            host.values
                .iter()
                .enumerate()
                .all(|(i, &v)| v == (n - 1 - i) as f64)
        );
        let too_much = device.max_shared_bytes() + 1;
        let error = device
            .launch(
                &kernel,
                [1, 1, 1],
                [256, 1, 1],
                too_much,
                &[LaunchArg::Tensor(&out), LaunchArg::I32(1)],
            )
            .expect_err("too much shared memory");
        assert!(error.message.contains("shared memory"), "{error}");
    }

    /// A kernel that faults must come back as a `CudaError`. A fault poisons the whole process's CUDA
    /// state, so the faulting launch runs in a child process: this same test binary, running only this
    /// test, with an environment variable that selects the child's part.
    #[test]
    fn a_kernel_fault_is_an_error() {
        const CHILD: &str = "TILEC_CUDA_FAULT_CHILD";
        let Some(device) = device_or_skip("a_kernel_fault_is_an_error") else {
            return;
        };
        let source = r#"
extern "C" __global__ void fault(float* out) {
    float* wild = (float*)0x10;
    out[0] = *wild;
}
"#;
        if std::env::var_os(CHILD).is_some() {
            let kernel = device
                .compile(source, "fault", &device.default_arch())
                .expect("the faulting kernel compiles");
            let target = device
                .zeros(DType::Float32, &[1])
                .expect("allocate the target");
            let error = device
                .launch(
                    &kernel,
                    [1, 1, 1],
                    [1, 1, 1],
                    0,
                    &[LaunchArg::Tensor(&target)],
                )
                .expect_err("the fault is reported");
            eprintln!("expected fault: {error}");
            assert!(error.message.contains("CUDA_ERROR"), "{error}");
            assert!(device.download(&target).is_err(), "the fault is sticky");
            // The fault is the process's for good (CUDA: "the process must be terminated and
            // relaunched"): even a fresh context cannot be opened, which is why `tilec watch`
            // restarts itself after one.
            drop((kernel, target, device));
            assert!(
                CudaDevice::open().is_err(),
                "CUDA stays unusable after a fault"
            );
            return;
        }
        drop(device);
        let test_path = module_path!().split_once("::").map_or("", |(_, path)| path);
        let output =
            std::process::Command::new(std::env::current_exe().expect("the test binary path"))
                .args([
                    "--exact",
                    &format!("{test_path}::a_kernel_fault_is_an_error"),
                    "--nocapture",
                ])
                .env(CHILD, "1")
                .output()
                .expect("the child process runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!("child: {stderr}");
        assert!(output.status.success(), "{stderr}");
        assert!(
            stderr.contains("expected fault"),
            "the child must have run the test: {stderr}"
        );
    }

    #[test]
    fn architecture_names() {
        assert!(is_architecture_name("sm_90"));
        assert!(is_architecture_name("sm_90a"));
        assert!(is_architecture_name("compute_80"));
        assert!(!is_architecture_name("sm_"));
        assert!(!is_architecture_name("sm_90 --use_fast_math"));
        assert!(!is_architecture_name("90"));
    }

    #[test]
    fn compile_inputs_are_checked_before_nvrtc() {
        let settings = CompileSettings::for_arch("sm_90");
        assert!(check_compile_inputs("__global__ void k() {}", "k", &settings).is_ok());
        assert!(check_compile_inputs("a\0b", "k", &settings).is_err());
        assert!(check_compile_inputs("", "not a name", &settings).is_err());
        assert!(check_compile_inputs("", "k", &CompileSettings::for_arch("-O3")).is_err());
        let options = settings.nvrtc_options();
        assert!(options.contains(&"--gpu-architecture=sm_90a".to_string()));
        assert!(!options.iter().any(|option| option.contains("fast_math")));
    }

    #[test]
    fn timing_summary() {
        let timing = Timing::from_samples(vec![3.0, 1.0, 2.0, 10.0]).expect("four samples");
        assert_eq!(
            (timing.min_ms, timing.median_ms, timing.max_ms),
            (1.0, 2.5, 10.0)
        );
        assert_eq!(
            Timing::from_samples(vec![2.0, 1.0, 3.0])
                .expect("three samples")
                .median_ms,
            2.0
        );
        assert_eq!(Timing::from_samples(Vec::new()), None);
    }

    /// A tensor map with `box_dims` and `swizzle` over the buffer of parameter 0.
    fn tensor_map(box_dims: &[u32], swizzle: Option<DescriptorSwizzle>) -> TensorMap {
        TensorMap {
            name: "A_map".to_owned(),
            buffer: tilec_ir::thread::BufferId(0),
            box_dims: box_dims.to_vec(),
            swizzle,
        }
    }

    #[test]
    fn tensor_map_layouts_follow_the_row_major_tensor() {
        let map = tensor_map(&[64, 64], Some(DescriptorSwizzle::Bytes128));
        let layout = TensorMapLayout::new(&map, DType::Float16, &[128, 64], 0x1000)
            .expect("a 64 x 64 fp16 box of a 128 x 64 tensor");
        assert_eq!(
            layout,
            TensorMapLayout {
                data_type: CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                global_dims: vec![64, 128],
                global_strides: vec![128],
                box_dims: vec![64, 64],
                element_strides: vec![1, 1],
                swizzle: CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            }
        );
        let map = tensor_map(&[32, 8, 1], None);
        let layout = TensorMapLayout::new(&map, DType::BFloat16, &[3, 8, 32], 0x2000)
            .expect("a bf16 box of a three-dimensional tensor");
        assert_eq!(layout.global_dims, vec![32, 8, 3]);
        assert_eq!(layout.global_strides, vec![64, 512]);
        assert_eq!(layout.element_strides, vec![1, 1, 1]);
        assert_eq!(
            (layout.data_type, layout.swizzle),
            (
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE
            )
        );
        let one_dimensional = TensorMapLayout::new(&tensor_map(&[16], None), DType::UInt8, &[5], 0)
            .expect("a one-dimensional byte tensor");
        assert!(one_dimensional.global_strides.is_empty());
        let types = [
            (
                DType::Float32,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            ),
            (
                DType::Float64,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
            ),
            (
                DType::Int32,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
            ),
            (
                DType::Int8,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            ),
            (
                DType::Float8E4M3,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            ),
            (
                DType::Int16,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            ),
        ];
        for (dtype, expected) in types {
            assert_eq!(tensor_map_data_type(dtype), expected, "{dtype}");
        }
    }

    #[test]
    fn tensor_map_layouts_the_driver_refuses_are_errors() {
        let refused = |box_dims: &[u32], swizzle, dtype, shape: &[usize], address| {
            TensorMapLayout::new(&tensor_map(box_dims, swizzle), dtype, shape, address)
                .expect_err("the driver refuses this layout")
        };
        let f16 = DType::Float16;
        let cases = [
            (
                refused(&[8; 6], None, f16, &[8; 6], 0),
                "the tensor has 6 dimensions, but TMA handles 1 to 5",
            ),
            (
                refused(&[8], None, f16, &[8, 8], 0),
                "the map's box has 1 dimensions, but the tensor has 2",
            ),
            (
                refused(&[8, 8], None, f16, &[8, 8], 0x1008),
                "the tensor's device address 0x1008 is not a multiple of 16 bytes",
            ),
            (
                refused(&[8, 8], None, f16, &[0, 8], 0),
                "dimension 1 (innermost first) has 0 elements, but TMA needs 1 to 2^32",
            ),
            (
                refused(&[8, 4], None, f16, &[4, 7], 0),
                "consecutive indices of dimension 1 (innermost first) are 14 bytes apart, but TMA \
                 needs a multiple of 16 bytes below 2^40",
            ),
            (
                refused(&[8, 300], None, f16, &[512, 8], 0),
                "box dimension 1 (innermost first) is 300 elements, but TMA boxes have 1 to 256",
            ),
            (
                refused(&[3, 8], None, DType::Float32, &[8, 8], 0),
                "the box's inner dimension is 12 bytes, but TMA needs a multiple of 16",
            ),
            (
                refused(&[48, 8], Some(DescriptorSwizzle::Bytes64), f16, &[8, 64], 0),
                "the box's inner dimension is 96 bytes, more than the 64-byte swizzle span",
            ),
        ];
        for (message, expected) in cases {
            assert_eq!(message, expected);
        }
    }

    /// Two TMA loads of 8 x 4 boxes of a 16 x 32 fp32 tensor through a map the driver encoded and
    /// the launch passed by value, one inside the tensor and one reaching past its corner, which
    /// reads zeros. Needs a Hopper GPU (sm_90); elsewhere only the encoding is checked.
    #[test]
    fn a_tma_load_through_an_encoded_tensor_map() {
        let Some(device) = device_or_skip("a_tma_load_through_an_encoded_tensor_map") else {
            return;
        };
        let a = HostTensor::random(DType::Float32, &[16, 32], 3);
        let a_dev = device.upload(&a).expect("upload a");
        let out_dev = device.zeros(DType::Float32, &[64]).expect("allocate out");
        let map = device
            .encode_tensor_map(&tensor_map(&[8, 4], None), &a_dev, "A")
            .expect("the driver encodes the map");
        let wrong = device.encode_tensor_map(&tensor_map(&[8], None), &a_dev, "A");
        let wrong = wrong.expect_err("a box of the wrong rank");
        assert!(wrong.during.contains("`A_map` of tensor `A`"), "{wrong}");
        if device.compute_capability().0 < 9 {
            eprintln!("no TMA before sm_90; checked the encoding only");
            return;
        }
        let kernel = device
            .compile(TMA_COPY, "tma_copy", &device.default_arch())
            .expect("tma_copy compiles");
        let args = [
            LaunchArg::Tensor(&out_dev),
            LaunchArg::Tensor(&a_dev),
            LaunchArg::I32(0),
            LaunchArg::TensorMap(&map),
        ];
        device
            .launch(&kernel, [1, 1, 1], [64, 1, 1], 0, &args)
            .expect("tma_copy runs");
        let out = device.download(&out_dev).expect("download out");
        let at = |row: usize, col: usize| {
            if row < 16 && col < 32 {
                a.values[row * 32 + col]
            } else {
                0.0
            }
        };
        for i in 0..32 {
            let (row, col) = (i / 8, i % 8);
            assert_eq!(out.values[i], at(4 + row, 8 + col), "element {i}");
            assert_eq!(
                out.values[32 + i],
                at(14 + row, 28 + col),
                "element {}",
                32 + i
            );
        }
    }

    /// Loads box (8, 4) and box (28, 14) (column, row) of the map into shared memory, both
    /// completing on one mbarrier, and copies them out. The tensor pointer and the scalar are
    /// unused; they are there to check the argument order of printed kernels.
    const TMA_COPY: &str = r#"
struct __align__(64) tl_tensor_map {
    unsigned long long opaque[16];
};
__device__ __forceinline__ unsigned int smem(const void* p) {
    return (unsigned int)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void load(float* dst, const tl_tensor_map* map, unsigned long long* bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 :: "r"(smem(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem(bar)),
                    "r"(c0), "r"(c1) : "memory");
}
extern "C" __global__ void tma_copy(float* out, const float* a, int unused,
                                    const __grid_constant__ tl_tensor_map map) {
    __shared__ __align__(128) float tile[64];
    __shared__ __align__(8) unsigned long long bar;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(&bar)) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 256;" :: "r"(smem(&bar)) : "memory");
        load(tile, &map, &bar, 8, 4);
        load(tile + 32, &map, &bar, 28, 14);
    }
    asm volatile("{\n.reg .pred P1;\nWAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], 0;\n"
                 "@P1 bra DONE_%=;\nbra WAIT_%=;\nDONE_%=:\n}\n"
                 :: "r"(smem(&bar)) : "memory");
    out[threadIdx.x] = tile[threadIdx.x];
}
"#;

    #[test]
    fn unavailable_messages_say_what_is_missing() {
        assert!(Unavailable::NoDriverLibrary.to_string().contains("libcuda"));
        assert!(Unavailable::NoNvrtcLibrary.to_string().contains("libnvrtc"));
        let failure = CompileFailure {
            message: "NVRTC could not compile the source".into(),
            log: "k.cu(1): error: expected an expression\n".into(),
            options: Vec::new(),
        };
        assert!(failure.to_string().ends_with("expected an expression"));
    }
}

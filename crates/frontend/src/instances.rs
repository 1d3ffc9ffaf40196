//! Finding a file's kernel instances: calls in driver code, `tilec.toml` entries, and defaults.
//!
//! Driver code (`main()`, module-level `kernel = f.compile(...)`) is evaluated leniently with every
//! kernel name bound to a recorder, so that `M, N = 1024, 512; f(M, N)` or a call inside a list
//! literal yields its concrete arguments. Each call site is one instance, even inside a loop.

use std::rc::Rc;

use ruff_python_ast::Stmt;
use ruff_text_size::Ranged;
use rustc_hash::FxHashSet;
use tilec_ir::{ConstValue, Span};

use crate::build::module_env;
use crate::builder::{Builder, RecordedCall};
use crate::outline::{KernelStyle, Outline, call_sites, context_statements, range_span};
use crate::syntax::ParsedModule;
use crate::value::{Value, bind, new_env};

/// One instance the file asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InstanceSpec {
    pub kernel: String,
    /// Arguments by parameter (or eager const) name, as written at the call site.
    pub args: Vec<(String, ConstValue)>,
    pub origin: InstanceOrigin,
    /// Parameters the call passes something for that cannot be evaluated without running Python
    /// (a tensor, `sys.argv`): the instance lacks their values, and diagnostics say why.
    pub unevaluated: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstanceOrigin {
    /// A call in the file, at this range.
    CallSite(Span),
    /// An `[[instance]]` of a tilec.toml.
    Manifest,
    /// No instantiation anywhere: every parameter has a default.
    Defaults,
}

impl InstanceOrigin {
    pub fn span(&self) -> Option<Span> {
        match self {
            InstanceOrigin::CallSite(span) => Some(*span),
            _ => None,
        }
    }
}

/// An instance listed in a tilec.toml for this file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ManifestInstance {
    pub kernel: String,
    pub args: Vec<(String, ConstValue)>,
}

/// Every instance of every kernel of the file, grouped by kernel in file order, call sites first.
pub fn find_instances(
    parsed: &ParsedModule,
    outline: &Outline,
    manifest: &[ManifestInstance],
) -> Vec<InstanceSpec> {
    let recorded = record_calls(parsed, outline);
    let mut instances = Vec::new();
    for kernel in &outline.kernels {
        let before = instances.len();
        for call in recorded.iter().filter(|call| call.kernel == kernel.name()) {
            let (args, unevaluated) = bind_call_args(call, outline);
            instances.push(InstanceSpec {
                kernel: call.kernel.clone(),
                args,
                origin: InstanceOrigin::CallSite(call.span),
                unevaluated,
            });
        }
        for entry in manifest
            .iter()
            .filter(|entry| entry.kernel == kernel.name())
        {
            instances.push(InstanceSpec {
                kernel: entry.kernel.clone(),
                args: entry.args.clone(),
                origin: InstanceOrigin::Manifest,
                unevaluated: Vec::new(),
            });
        }
        let defaults_suffice = kernel.source.style == KernelStyle::Eager
            || kernel.params.iter().all(|param| param.has_default);
        if instances.len() == before && defaults_suffice {
            instances.push(InstanceSpec {
                kernel: kernel.name().to_owned(),
                args: Vec::new(),
                origin: InstanceOrigin::Defaults,
                unevaluated: Vec::new(),
            });
        }
    }
    instances
}

/// Evaluates the driver code and returns the instantiating calls in source order, one per site.
fn record_calls(parsed: &ParsedModule, outline: &Outline) -> Vec<RecordedCall> {
    let module = parsed.syntax();
    let names: Vec<&str> = outline.kernels.iter().map(|kernel| kernel.name()).collect();
    let context: Vec<&Stmt> = context_statements(module, &names).collect();
    let mut builder = Builder::new(false);
    builder.step_budget = crate::builder::DRIVER_STEP_BUDGET;
    let globals = module_env(&mut builder, &context);
    for name in &names {
        bind(
            &globals,
            name,
            Value::KernelRef {
                name: Rc::from(*name),
                compile: false,
            },
        );
    }
    bind(&globals, "__name__", Value::str("__main__"));
    let context_ranges: FxHashSet<_> = context.iter().map(|stmt| stmt.range()).collect();
    let drivers: Vec<&Stmt> = module
        .body
        .iter()
        .filter(|stmt| !context_ranges.contains(&stmt.range()))
        .filter(
            |stmt| !matches!(stmt, Stmt::FunctionDef(def) if names.contains(&def.name.as_str())),
        )
        .collect();
    for stmt in &drivers {
        let _ = builder.exec_body(&globals, std::slice::from_ref(*stmt));
    }
    // Driver functions run once each, even when nothing calls them (a `main()` behind argparse).
    for stmt in &drivers {
        if let Stmt::FunctionDef(def) = stmt {
            let frame = new_env(Some(globals.clone()));
            for param in def.parameters.iter_non_variadic_params() {
                bind(
                    &frame,
                    param.name().as_str(),
                    Value::Opaque(Rc::from("a driver argument")),
                );
            }
            let _ = builder.exec_body(&frame, &def.body);
        }
    }
    let mut calls = std::mem::take(&mut builder.calls);
    let mut seen = FxHashSet::default();
    calls.retain(|call| seen.insert(call.span));
    // A call site evaluation never reached (behind a runtime condition) still counts, with the
    // arguments that can be evaluated in module scope.
    for stmt in &drivers {
        for site in call_sites(stmt, &names) {
            let span = range_span(site.call);
            if seen.insert(span) {
                calls.push(evaluate_each_argument(&globals, site));
            }
        }
    }
    calls.sort_by_key(|call| call.span.start);
    calls
}

/// A call site evaluation never reached: each argument is evaluated on its own in module scope, so
/// one argument tilec cannot evaluate does not lose the others.
fn evaluate_each_argument<'a>(
    globals: &crate::value::Env<'a>,
    site: crate::outline::CallSite<'a>,
) -> RecordedCall {
    let mut builder = Builder::new(false);
    let scope = new_env(Some(globals.clone()));
    let mut evaluate = |expr: &'a ruff_python_ast::Expr| {
        builder
            .eval(&scope, expr)
            .ok()
            .and_then(|value| value.to_const())
    };
    let positional = site.call.arguments.args.iter().map(&mut evaluate).collect();
    let keywords = site
        .call
        .arguments
        .keywords
        .iter()
        .filter_map(|keyword| {
            Some((
                keyword.arg.as_ref()?.as_str().to_owned(),
                evaluate(&keyword.value),
            ))
        })
        .collect();
    RecordedCall {
        span: range_span(site.call),
        kernel: site.kernel,
        is_compile: site.is_compile,
        positional,
        keywords,
    }
}

/// Names a call's arguments by the kernel's parameters. Arguments tilec cannot evaluate are left
/// out and named in the second list.
fn bind_call_args(
    call: &RecordedCall,
    outline: &Outline,
) -> (Vec<(String, ConstValue)>, Vec<String>) {
    let kernel = outline.kernel(&call.kernel);
    let params = kernel
        .map(|kernel| kernel.params.as_slice())
        .unwrap_or_default();
    let eager = kernel.is_some_and(|kernel| kernel.source.style == KernelStyle::Eager);
    let positional = if call.is_compile {
        &[][..]
    } else {
        &call.positional[..]
    };
    let named = params
        .iter()
        .map(|param| &param.name)
        .zip(positional)
        .chain(call.keywords.iter().map(|(name, value)| (name, value)));
    let mut args: Vec<(String, ConstValue)> = Vec::new();
    let mut unevaluated: Vec<String> = Vec::new();
    for (name, value) in named {
        args.retain(|(existing, _)| existing != name);
        unevaluated.retain(|existing| existing != name);
        match value {
            Some(value) => args.push((name.clone(), value.clone())),
            // An eager kernel is called with tensors: those are not meta arguments.
            None if eager => {}
            None => unevaluated.push(name.clone()),
        }
    }
    (args, unevaluated)
}

/// One `@autotune` configuration: parameter values by name.
pub type AutotuneConfig = Vec<(String, ConstValue)>;

/// The configurations of a kernel's `@autotune(configs=...)` / `@tilelang.autotune(configs=...)`
/// decorator, evaluated in module scope (a literal list of dicts, or a helper such as
/// `get_configs()` that builds them with `itertools.product`). `None` when the kernel has no such
/// decorator; `Some(Err(why))` when its configs cannot be evaluated without running Python.
pub fn autotune_configs(
    parsed: &ParsedModule,
    outline: &Outline,
    kernel: &str,
) -> Option<Result<Vec<AutotuneConfig>, String>> {
    let module = parsed.syntax();
    let def = module.body.iter().find_map(|stmt| match stmt {
        Stmt::FunctionDef(def) if def.name.as_str() == kernel => Some(def),
        _ => None,
    })?;
    let configs = def.decorator_list.iter().find_map(|decorator| {
        let ruff_python_ast::Expr::Call(call) = &decorator.expression else {
            return None;
        };
        let name = crate::outline::dotted_name(&call.func)?;
        if name != "autotune" && !name.ends_with(".autotune") {
            return None;
        }
        call.arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "configs"))
            .map(|k| &k.value)
    })?;
    let names: Vec<&str> = outline.kernels.iter().map(|k| k.name()).collect();
    let context: Vec<&Stmt> = context_statements(module, &names).collect();
    let mut builder = Builder::new(false);
    builder.step_budget = crate::builder::DRIVER_STEP_BUDGET;
    let globals = module_env(&mut builder, &context);
    let value = builder
        .eval(&globals, configs)
        .ok()
        .and_then(|value| value.to_const());
    Some(configs_from(value))
}

/// A list of `{name: value}` dicts as configurations.
fn configs_from(value: Option<ConstValue>) -> Result<Vec<AutotuneConfig>, String> {
    let Some(ConstValue::List(items) | ConstValue::Tuple(items)) = value else {
        return Err(
            "the autotune configs do not evaluate to a list without running Python".to_owned(),
        );
    };
    items
        .into_iter()
        .map(|item| match item {
            ConstValue::Dict(entries) => entries
                .into_iter()
                .map(|(key, value)| match key {
                    ConstValue::Str(name) => Ok((name, value)),
                    other => Err(format!("an autotune config key is not a name: {other:?}")),
                })
                .collect(),
            other => Err(format!("an autotune config is not a dict: {other:?}")),
        })
        .collect()
}

#[cfg(test)]
mod autotune_tests {
    use super::*;

    const TUNED: &str = r#"
import itertools
import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def get_configs():
    iter_params = dict(block_M=[64, 128], threads=[128, 256])
    return [dict(zip(iter_params, values)) for values in itertools.product(*iter_params.values())]


@autotune(configs=get_configs(), warmup=10, rep=10)
@tilelang.jit(out_idx=[1])
def scale(M, block_M=64, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i in T.Parallel(block_M):
                B[bx * block_M + i] = A[bx * block_M + i] * 2.0

    return main


@tilelang.autotune(configs=[{"block_M": 32}, {"block_M": 16, "threads": 32}])
@tilelang.jit(out_idx=[1])
def literal(M, block_M=64, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i in T.Parallel(block_M):
                B[bx * block_M + i] = A[bx * block_M + i]

    return main
"#;

    fn configs(kernel: &str) -> Option<Result<Vec<AutotuneConfig>, String>> {
        let parsed = ParsedModule::parse(TUNED);
        let outline = crate::outline(&parsed, TUNED);
        autotune_configs(&parsed, &outline, kernel)
    }

    #[test]
    fn configs_built_by_a_helper_with_itertools_product_are_evaluated() {
        let int = |name: &str, v: i64| (name.to_owned(), ConstValue::Int(v));
        assert_eq!(
            configs("scale"),
            Some(Ok(vec![
                vec![int("block_M", 64), int("threads", 128)],
                vec![int("block_M", 64), int("threads", 256)],
                vec![int("block_M", 128), int("threads", 128)],
                vec![int("block_M", 128), int("threads", 256)],
            ]))
        );
        assert_eq!(
            configs("literal"),
            Some(Ok(vec![
                vec![int("block_M", 32)],
                vec![int("block_M", 16), int("threads", 32)],
            ]))
        );
    }
}

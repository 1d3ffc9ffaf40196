//! Finding the kernels of a file (both styles), the module-level context they may use, and the
//! driver code that instantiates them.

use ruff_python_ast::visitor::{Visitor, walk_expr};
use ruff_python_ast::{Expr, ModModule, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;
use rustc_hash::{FxHashMap, FxHashSet};
use tilec_ir::Span;

use crate::syntax::{ParsedModule, normalized_text, span_of};

/// How a kernel is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelStyle {
    /// A factory (jit-decorated or not) that defines a nested `@T.prim_func` and returns it.
    Classic,
    /// `@tilelang.jit def f(A, B, block_M: int = 128)`: the function body is the kernel.
    Eager,
    /// A module-level `@T.prim_func`, closing over module globals.
    PrimFunc,
    /// A function whose `@T.prim_func` is defined one function further in (a two-level factory,
    /// an autotuning wrapper): the function runs as driver code, then the nested factory it
    /// defines builds the prim_func.
    Wrapper,
}

/// The position-free source of one kernel: what its world is built from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelSource {
    pub name: String,
    pub style: KernelStyle,
    /// The function's text (decorators included) in normal form: no comments, no blank lines. For
    /// a method, the whole class's.
    pub normalized: String,
    /// For a method of a class: which one, and how it is bound.
    pub method: Option<MethodOutline>,
}

/// A kernel that is a method of a module-level class (`Class.method`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MethodOutline {
    pub class: String,
    pub method: String,
    /// Its first parameter is the object (`self`) or the class (`cls`); false for a staticmethod.
    pub receiver: bool,
}

/// The module-level statements a kernel may use (imports, constants, helper functions), in normal
/// form. Kernel definitions and driver code are left out, so editing them does not touch it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContextSource {
    pub normalized: String,
}

/// A parameter of a kernel's factory or jit function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParamOutline {
    pub name: String,
    pub has_default: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelOutline {
    pub source: KernelSource,
    pub params: Vec<ParamOutline>,
    /// Eager style: the parameters declared as tensors, with the name written for each extent
    /// (`A: T.Tensor((M, K), dtype)` gives `A` and `[M, K]`).
    pub tensors: Vec<(String, Vec<Option<String>>)>,
    /// The whole definition, decorators included.
    pub span: Span,
    /// The function's name in its `def`.
    pub name_span: Span,
    /// The index of the module-level statement that holds the definition (the `def` itself, or
    /// the class, `if` or `try` around it): instances find their definition there again without
    /// walking the whole module.
    pub statement: usize,
}

impl KernelOutline {
    pub fn name(&self) -> &str {
        &self.source.name
    }
}

/// What a file holds, as far as tilec is concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outline {
    /// True when the file imports TileLang's language module; other Python files are left alone.
    pub uses_tilelang: bool,
    pub kernels: Vec<KernelOutline>,
    pub context: ContextSource,
    /// The indices of the module-level statements that make up the context, in order (the
    /// statements [`ContextSource`] is the normal form of).
    pub context_statements: Vec<usize>,
}

impl Outline {
    pub fn kernel(&self, name: &str) -> Option<&KernelOutline> {
        self.kernels.iter().find(|kernel| kernel.name() == name)
    }

    /// The context statements of `module`, the parse this outline was made from.
    pub(crate) fn context_of<'m>(&self, module: &'m ModModule) -> Vec<&'m Stmt> {
        self.context_statements
            .iter()
            .filter_map(|&index| module.body.get(index))
            .collect()
    }
}

/// Finds the kernels, the context and whether the file uses TileLang at all.
pub fn outline(parsed: &ParsedModule, text: &str) -> Outline {
    let module = parsed.syntax();
    let kernels: Vec<KernelOutline> = kernel_definitions(module)
        .into_iter()
        .map(|found| KernelOutline {
            source: KernelSource {
                name: found.name,
                style: found.style,
                normalized: match found.class {
                    Some(class) => normalized_text(parsed, text, class.range()),
                    None => normalized_text(parsed, text, found.def.range()),
                },
                method: found.class.map(|class| MethodOutline {
                    class: class.name.to_string(),
                    method: found.def.name.to_string(),
                    receiver: has_receiver(found.def),
                }),
            },
            params: found
                .def
                .parameters
                .iter_non_variadic_params()
                .skip(usize::from(
                    found.class.is_some() && has_receiver(found.def),
                ))
                .map(|param| ParamOutline {
                    name: param.name().as_str().to_owned(),
                    has_default: param.default.is_some(),
                })
                .collect(),
            tensors: match found.style {
                KernelStyle::Eager => crate::generic::tensor_extent_names(found.def),
                KernelStyle::Classic | KernelStyle::PrimFunc | KernelStyle::Wrapper => Vec::new(),
            },
            span: span_of(found.def.range()),
            name_span: span_of(found.def.name.range),
            statement: module
                .body
                .partition_point(|stmt| stmt.end() <= found.def.start()),
        })
        .collect();
    // A file that defines a kernel uses TileLang even when the import is not its own: libraries
    // with TileLang as an optional dependency get the modules from a helper of theirs
    // (`tilelang, T = load_tilelang()`).
    let uses_tilelang = imports_tilelang(&module.body) || !kernels.is_empty();
    let names = KernelNames::new(kernels.iter().map(KernelOutline::name));
    let mut context = String::new();
    let mut indices = Vec::new();
    for (index, stmt) in module.body.iter().enumerate() {
        if is_context_statement(stmt, &names) {
            context.push_str(&normalized_text(parsed, text, stmt.range()));
            indices.push(index);
        }
    }
    Outline {
        uses_tilelang,
        kernels,
        context: ContextSource {
            normalized: context,
        },
        context_statements: indices,
    }
}

/// Whether a module-level statement belongs to the kernels' context: everything but kernel
/// definitions, driver code (anything that instantiates a kernel, and `if __name__ ==
/// "__main__"`), and bare expression statements (calls like `main()`, docstrings).
fn is_context_statement(stmt: &Stmt, kernel_names: &KernelNames<'_>) -> bool {
    match stmt {
        Stmt::FunctionDef(def) => {
            !kernel_names.contains(def.name.as_str()) && !instantiates_kernel(stmt, kernel_names)
        }
        // A class whose methods are kernels is part of those kernels' sources, like a kernel.
        Stmt::ClassDef(class) => {
            let prefix = format!("{}.", class.name);
            !kernel_names.0.iter().any(|name| name.starts_with(&prefix))
                && !instantiates_kernel(stmt, kernel_names)
        }
        Stmt::Expr(_) => false,
        Stmt::If(if_stmt) => {
            !is_main_guard(&if_stmt.test) && !instantiates_kernel(stmt, kernel_names)
        }
        _ => !instantiates_kernel(stmt, kernel_names),
    }
}

/// The names of a file's kernels, for the membership tests of every statement and call: a set,
/// as a file may define thousands of kernels.
#[derive(Debug, Default)]
pub(crate) struct KernelNames<'n>(FxHashSet<&'n str>);

impl<'n> KernelNames<'n> {
    pub(crate) fn new(names: impl IntoIterator<Item = &'n str>) -> KernelNames<'n> {
        KernelNames(names.into_iter().collect())
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

/// A kernel definition found in a module.
pub(crate) struct FoundKernel<'a> {
    /// The name the kernel goes by: its function's (`Class.method` for a method), with `#2`, `#3`,
    /// ... for later definitions of the same name (the branches of a module-level `if`/`else` or
    /// `try`/`except`).
    pub name: String,
    pub def: &'a StmtFunctionDef,
    pub style: KernelStyle,
    /// The module-level class it is a method of.
    pub class: Option<&'a ruff_python_ast::StmtClassDef>,
}

/// The kernels of a module, in source order: its functions, and those defined under module-level
/// `if`, `try` and `with` statements (a guarded import of TileLang, a fallback definition).
pub(crate) fn kernel_definitions(module: &ModModule) -> Vec<FoundKernel<'_>> {
    let mut found: Vec<FoundKernel<'_>> = Vec::new();
    // How many kernels so far go by each base name: a map, as a file may define thousands.
    let mut seen: FxHashMap<String, usize> = FxHashMap::default();
    let methods = module_classes(&module.body).into_iter().flat_map(|class| {
        nested_functions(&class.body)
            .into_iter()
            .map(move |def| (def, Some(class)))
    });
    let functions = nested_functions(&module.body)
        .into_iter()
        .map(|def| (def, None));
    for (def, class) in functions.chain(methods) {
        let Some(style) = kernel_style(def) else {
            continue;
        };
        let base = match class {
            Some(class) => format!("{}.{}", class.name, def.name),
            None => def.name.to_string(),
        };
        let earlier = seen.entry(base.clone()).or_insert(0);
        *earlier += 1;
        let name = match *earlier {
            1 => base,
            n => format!("{base}#{n}"),
        };
        found.push(FoundKernel {
            name,
            def,
            style,
            class,
        });
    }
    found
}

/// The function definition (with the class it is a method of) of a kernel the outline found,
/// located again in the same parse: only inside the module-level statement that holds it.
pub(crate) fn definition_at<'m>(
    module: &'m ModModule,
    kernel: &KernelOutline,
) -> Option<(
    &'m StmtFunctionDef,
    Option<&'m ruff_python_ast::StmtClassDef>,
)> {
    let span = kernel.span;
    let holder = std::slice::from_ref(module.body.get(kernel.statement)?);
    let functions = nested_functions(holder).into_iter().map(|def| (def, None));
    let methods = module_classes(holder).into_iter().flat_map(|class| {
        nested_functions(&class.body)
            .into_iter()
            .map(move |def| (def, Some(class)))
    });
    functions
        .chain(methods)
        .find(|(def, _)| span_of(def.range()) == span)
}

/// The classes defined at module level (under compound statements too).
fn module_classes(body: &[Stmt]) -> Vec<&ruff_python_ast::StmtClassDef> {
    let mut classes = Vec::new();
    for stmt in body {
        match stmt {
            Stmt::ClassDef(class) => classes.push(class),
            other => {
                for inner in inner_bodies(other) {
                    classes.extend(module_classes(inner));
                }
            }
        }
    }
    classes
}

/// Whether a method's first parameter is its object or class (it is not a `@staticmethod`).
pub(crate) fn has_receiver(def: &StmtFunctionDef) -> bool {
    crate::classes::method_kind(def) != Some(crate::classes::MethodKind::StaticMethod)
}

/// Decides whether a function is a kernel, and in which style.
fn kernel_style(def: &StmtFunctionDef) -> Option<KernelStyle> {
    if decorated(def, "prim_func") {
        return Some(KernelStyle::PrimFunc);
    }
    match prim_func_depth(&def.body) {
        Some(0) => return Some(KernelStyle::Classic),
        Some(_) => return Some(KernelStyle::Wrapper),
        None => {}
    }
    if is_eager_kernel(def) {
        return Some(KernelStyle::Eager);
    }
    // A function that defines an eager kernel (a closure over its arguments) wraps it.
    if nested_eager_kernel(&def.body).is_some() {
        return Some(KernelStyle::Wrapper);
    }
    None
}

/// Whether a decorator of `def` is `suffix` (`jit`, `tilelang.jit(...)`, `T.prim_func`).
fn decorated(def: &StmtFunctionDef, suffix: &str) -> bool {
    def.decorator_list.iter().any(|decorator| {
        let callee = match &decorator.expression {
            Expr::Call(call) => &*call.func,
            other => other,
        };
        dotted_name(callee)
            .is_some_and(|name| name == suffix || name.ends_with(&format!(".{suffix}")))
    })
}

/// `@tilelang.jit` / `@autotune` on a function whose body launches `T.Kernel`.
pub(crate) fn is_eager_kernel(def: &StmtFunctionDef) -> bool {
    (decorated(def, "jit") || decorated(def, "autotune")) && contains_kernel_launch(&def.body)
}

/// The eager kernel a body defines (under any compound statement, or in a function it defines),
/// if any: the first in source order.
pub(crate) fn nested_eager_kernel(body: &[Stmt]) -> Option<&StmtFunctionDef> {
    nested_functions(body).into_iter().find_map(|inner| {
        if is_eager_kernel(inner) {
            Some(inner)
        } else {
            nested_eager_kernel(&inner.body)
        }
    })
}

/// Whether a `@T.prim_func` is defined in `body`, and how many functions further in: 0 when the
/// body itself defines it (under any compound statement), 1 when a function it defines does, ...
pub(crate) fn prim_func_depth(body: &[Stmt]) -> Option<usize> {
    body.iter()
        .filter_map(|stmt| match stmt {
            Stmt::FunctionDef(inner) if is_prim_func(inner) => Some(0),
            Stmt::FunctionDef(inner) => prim_func_depth(&inner.body).map(|depth| depth + 1),
            other => inner_bodies(other)
                .into_iter()
                .filter_map(prim_func_depth)
                .min(),
        })
        .min()
}

/// The functions a body defines, under any compound statement but not inside other functions.
pub(crate) fn nested_functions(body: &[Stmt]) -> Vec<&StmtFunctionDef> {
    let mut functions = Vec::new();
    for stmt in body {
        match stmt {
            Stmt::FunctionDef(def) => functions.push(def),
            other => {
                for inner in inner_bodies(other) {
                    functions.extend(nested_functions(inner));
                }
            }
        }
    }
    functions
}

/// The statement lists a compound statement holds directly (the branches of an `if`, the body,
/// handlers, `else` and `finally` of a `try`, the body and `else` of a loop, a `with`'s body),
/// not those of the functions and classes it defines: the places a definition or an import can
/// hide without leaving its scope.
pub(crate) fn inner_bodies(stmt: &Stmt) -> Vec<&[Stmt]> {
    match stmt {
        Stmt::If(if_stmt) => std::iter::once(if_stmt.body.as_slice())
            .chain(if_stmt.elif_else_clauses.iter().map(|c| c.body.as_slice()))
            .collect(),
        Stmt::Try(try_stmt) => std::iter::once(try_stmt.body.as_slice())
            .chain(try_stmt.handlers.iter().map(|handler| {
                let ruff_python_ast::ExceptHandler::ExceptHandler(handler) = handler;
                handler.body.as_slice()
            }))
            .chain([try_stmt.orelse.as_slice(), try_stmt.finalbody.as_slice()])
            .collect(),
        Stmt::With(with) => vec![with.body.as_slice()],
        Stmt::For(for_stmt) => vec![for_stmt.body.as_slice(), for_stmt.orelse.as_slice()],
        Stmt::While(while_stmt) => vec![while_stmt.body.as_slice(), while_stmt.orelse.as_slice()],
        Stmt::Match(match_stmt) => match_stmt.cases.iter().map(|c| c.body.as_slice()).collect(),
        _ => Vec::new(),
    }
}

/// `@T.prim_func` (or `@tilelang.language.prim_func`, `@prim_func`).
pub(crate) fn is_prim_func(def: &StmtFunctionDef) -> bool {
    def.decorator_list.iter().any(|decorator| {
        let callee = match &decorator.expression {
            Expr::Call(call) => &*call.func,
            other => other,
        };
        dotted_name(callee).is_some_and(|name| name.ends_with("prim_func"))
    })
}

/// `a.b.c` for a chain of attribute accesses on a name.
pub(crate) fn dotted_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Name(name) => Some(name.id.as_str().to_owned()),
        Expr::Attribute(attribute) => {
            let base = dotted_name(&attribute.value)?;
            Some(format!("{base}.{}", attribute.attr.as_str()))
        }
        _ => None,
    }
}

pub(crate) fn contains_kernel_launch(body: &[Stmt]) -> bool {
    body.iter().any(|stmt| match stmt {
        Stmt::With(with) => {
            with.items.iter().any(|item| match &item.context_expr {
                Expr::Call(call) => {
                    dotted_name(&call.func).is_some_and(|name| name.ends_with("Kernel"))
                }
                _ => false,
            }) || contains_kernel_launch(&with.body)
        }
        Stmt::If(if_stmt) => {
            contains_kernel_launch(&if_stmt.body)
                || if_stmt
                    .elif_else_clauses
                    .iter()
                    .any(|clause| contains_kernel_launch(&clause.body))
        }
        _ => false,
    })
}

/// Whether the file imports TileLang anywhere: at the top, behind a guard, or lazily in a function.
fn imports_tilelang(body: &[Stmt]) -> bool {
    body.iter().any(|stmt| match stmt {
        Stmt::Import(import) => import
            .names
            .iter()
            .any(|alias| alias.name.as_str().starts_with("tilelang")),
        Stmt::ImportFrom(import) => import
            .module
            .as_ref()
            .is_some_and(|module| module.as_str().starts_with("tilelang")),
        Stmt::FunctionDef(def) => imports_tilelang(&def.body),
        Stmt::ClassDef(class) => imports_tilelang(&class.body),
        other => inner_bodies(other).into_iter().any(imports_tilelang),
    })
}

/// `__name__ == "__main__"`.
pub(crate) fn is_main_guard(test: &Expr) -> bool {
    match test {
        Expr::Compare(compare) => {
            matches!(&*compare.left, Expr::Name(name) if name.id.as_str() == "__name__")
        }
        _ => false,
    }
}

/// A call that instantiates a kernel: `k(...)`, `k.compile(...)`, `k.get_tir(...)`,
/// `tilelang.compile(k(...))`.
#[derive(Clone, Debug)]
pub(crate) struct CallSite<'a> {
    pub kernel: String,
    pub call: &'a ruff_python_ast::ExprCall,
    /// The functions, lambdas and comprehensions around the call, outermost first: their names
    /// shadow the enclosing scope's when the call's arguments are evaluated.
    pub scopes: Vec<EnclosingScope<'a>>,
}

/// A scope between a call site and the module.
#[derive(Clone, Copy, Debug)]
pub(crate) enum EnclosingScope<'a> {
    Function(&'a StmtFunctionDef),
    Lambda(&'a ruff_python_ast::ExprLambda),
    /// The generators of a comprehension (each binds its targets).
    Comprehension(&'a [ruff_python_ast::Comprehension]),
}

/// The methods of a kernel that instantiate it, as `.compile(...)` does.
pub(crate) const COMPILE_METHODS: [&str; 4] =
    ["compile", "get_tir", "get_kernel_source", "par_compile"];

struct CallSiteFinder<'a, 'n> {
    kernel_names: &'n KernelNames<'n>,
    found: Vec<CallSite<'a>>,
    scopes: Vec<EnclosingScope<'a>>,
    /// The classes around the visited code, innermost last: `self.m(...)` there may call the
    /// method kernel `Class.m`.
    classes: Vec<&'a str>,
}

impl CallSiteFinder<'_, '_> {
    /// The kernel that `receiver.method(...)` calls: the method kernel `Class.method` when the
    /// receiver is the class, or `self` / `cls` inside it.
    fn method_kernel(&self, receiver: &str, method: &str) -> Option<String> {
        let class = match receiver {
            "self" | "cls" => *self.classes.last()?,
            class => class,
        };
        let name = format!("{class}.{method}");
        self.kernel_names.contains(name.as_str()).then_some(name)
    }
}

impl<'a> Visitor<'a> for CallSiteFinder<'a, '_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(def) => {
                self.scopes.push(EnclosingScope::Function(def));
                ruff_python_ast::visitor::walk_stmt(self, stmt);
                self.scopes.pop();
            }
            Stmt::ClassDef(class) => {
                self.classes.push(class.name.as_str());
                ruff_python_ast::visitor::walk_stmt(self, stmt);
                self.classes.pop();
            }
            _ => ruff_python_ast::visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        let scope = match expr {
            Expr::Lambda(lambda) => Some(EnclosingScope::Lambda(lambda)),
            Expr::ListComp(comp) => Some(EnclosingScope::Comprehension(&comp.generators)),
            Expr::SetComp(comp) => Some(EnclosingScope::Comprehension(&comp.generators)),
            Expr::DictComp(comp) => Some(EnclosingScope::Comprehension(&comp.generators)),
            Expr::Generator(comp) => Some(EnclosingScope::Comprehension(&comp.generators)),
            _ => None,
        };
        if let Expr::Call(call) = expr {
            let target = match &*call.func {
                Expr::Name(name) => Some(name.id.to_string()),
                Expr::Attribute(attribute)
                    if COMPILE_METHODS.contains(&attribute.attr.as_str()) =>
                {
                    match &*attribute.value {
                        Expr::Name(name) => Some(name.id.to_string()),
                        _ => None,
                    }
                }
                Expr::Attribute(attribute) => match &*attribute.value {
                    Expr::Name(receiver) => {
                        self.method_kernel(receiver.id.as_str(), attribute.attr.as_str())
                    }
                    _ => None,
                },
                _ => None,
            };
            if let Some(kernel) = target.filter(|name| self.kernel_names.contains(name.as_str())) {
                self.found.push(CallSite {
                    kernel,
                    call,
                    scopes: self.scopes.clone(),
                });
            }
        }
        if let Some(scope) = scope {
            self.scopes.push(scope);
            walk_expr(self, expr);
            self.scopes.pop();
        } else {
            walk_expr(self, expr);
        }
    }
}

/// Every instantiating call inside `stmt`, in source order.
pub(crate) fn call_sites<'a>(stmt: &'a Stmt, kernel_names: &KernelNames<'_>) -> Vec<CallSite<'a>> {
    let mut finder = CallSiteFinder {
        kernel_names,
        found: Vec::new(),
        scopes: Vec::new(),
        classes: Vec::new(),
    };
    finder.visit_stmt(stmt);
    finder.found
}

fn instantiates_kernel(stmt: &Stmt, kernel_names: &KernelNames<'_>) -> bool {
    !call_sites(stmt, kernel_names).is_empty()
}

/// The range of a statement or expression, as a span.
pub(crate) fn range_span(node: &impl Ranged) -> Span {
    span_of(node.range())
}

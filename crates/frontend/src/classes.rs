//! Python classes as compile-time values: configuration objects (`@dataclass`, `NamedTuple`, plain
//! classes whose `__init__` sets attributes), operator classes whose methods build kernels, base
//! classes, and the method kinds (`@staticmethod`, `@classmethod`, `@property`).
//!
//! The model is Python's, simplified where kernels never notice: attribute lookup goes through the
//! object's own attributes, then its class and the bases depth-first (not the C3 order), and
//! `super()` is not modelled (in driver code the statement that uses it is only unknown).

use std::cell::RefCell;
use std::rc::Rc;

use ruff_python_ast::{Expr, Stmt, StmtClassDef};
use rustc_hash::FxHashMap;
use tilec_ir::{Code, Span};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::outline::dotted_name;
use crate::value::{Env, Function, FunctionBody, Partial, Value, bind, lookup, new_env};

/// A class defined in the evaluated code.
#[derive(Debug)]
pub(crate) struct ClassValue<'a> {
    pub name: Rc<str>,
    /// What its body defined, methods wrapped by their kind.
    pub namespace: Env<'a>,
    pub bases: Vec<Rc<ClassValue<'a>>>,
    /// The fields of a `@dataclass` or `NamedTuple`, in order, with their defaults; `None` for a
    /// plain class.
    pub fields: Option<Vec<(String, Option<Value<'a>>)>>,
}

/// An instance of a [`ClassValue`].
#[derive(Debug)]
pub(crate) struct ObjectValue<'a> {
    pub class: Rc<ClassValue<'a>>,
    pub attrs: RefCell<FxHashMap<String, Value<'a>>>,
    /// The arguments it was made with, by parameter (or field) name: a method kernel called on it
    /// is instantiated with the same object.
    pub constructed_with: Vec<(String, Value<'a>)>,
}

/// How a function defined in a class body is bound when looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MethodKind {
    StaticMethod,
    ClassMethod,
    Property,
}

impl<'a> ClassValue<'a> {
    /// `name` in the class or its bases, depth-first.
    fn find(&self, name: &str) -> Option<Value<'a>> {
        if let Some(value) = self.namespace.borrow().vars.get(name) {
            return Some(value.clone());
        }
        self.bases.iter().find_map(|base| base.find(name))
    }

    /// Whether `self` is `other` or derives from it.
    pub(crate) fn derives_from(&self, other: &ClassValue<'a>) -> bool {
        std::ptr::eq(self, other) || self.bases.iter().any(|base| base.derives_from(other))
    }
}

impl<'a> ClassValue<'a> {
    /// The constructor's parameters that have no default, with their annotations where the
    /// constructor is an `__init__` that writes them: the fields of a dataclass or `NamedTuple`
    /// without a default, else the parameters of `__init__` after `self`.
    pub(crate) fn required_parameters(&self) -> Vec<(String, Option<&'a Expr>)> {
        if let Some(fields) = &self.fields {
            return fields
                .iter()
                .filter(|(_, default)| default.is_none())
                .map(|(name, _)| (name.clone(), None))
                .collect();
        }
        let Some(Value::Function(init)) = self.find("__init__") else {
            return Vec::new();
        };
        let FunctionBody::Def(def) = init.body else {
            return Vec::new();
        };
        def.parameters
            .iter_non_variadic_params()
            .skip(1)
            .filter(|param| param.default.is_none())
            .map(|param| (param.name().to_string(), param.annotation()))
            .collect()
    }
}

impl Builder<'_> {
    /// `class Name(bases): body`: runs the body in a namespace of its own and binds the class.
    pub(crate) fn exec_class<'a>(&mut self, env: &Env<'a>, class: &'a StmtClassDef) -> Eval<()> {
        let mut bases = Vec::new();
        let mut named_tuple = false;
        // A base tilec does not model (`torch.nn.Module`, `NamedTuple`) adds nothing it can see,
        // and is no error.
        let strict = std::mem::replace(&mut self.strict, false);
        for base in class.bases() {
            named_tuple |= dotted_name(base).is_some_and(|name| name.ends_with("NamedTuple"));
            if let Ok(Value::Class(base)) = self.eval(env, base) {
                bases.push(base);
            }
        }
        self.strict = strict;
        let namespace = new_env(Some(env.clone()));
        self.exec_body(&namespace, &class.body)?;
        // Methods close over the scope around the class, not over its namespace, as in Python.
        for stmt in &class.body {
            let Stmt::FunctionDef(def) = stmt else {
                continue;
            };
            let name = def.name.as_str();
            let Some(Value::Function(function)) = namespace.borrow().vars.get(name).cloned() else {
                continue;
            };
            let rebound = Value::Function(Rc::new(Function {
                closure: env.clone(),
                ..Function::clone(&function)
            }));
            let value = match method_kind(def) {
                Some(kind) => Value::Method(Box::new(rebound), Rc::from(kind.name())),
                None => rebound,
            };
            bind(&namespace, name, value);
        }
        let dataclass = class.decorator_list.iter().any(|decorator| {
            let callee = match &decorator.expression {
                Expr::Call(call) => &*call.func,
                other => other,
            };
            dotted_name(callee).is_some_and(|name| name.ends_with("dataclass"))
        });
        let fields = (dataclass || named_tuple || bases.iter().any(|b| b.fields.is_some()))
            .then(|| class_fields(&namespace, &class.body, &bases));
        let value = ClassValue {
            name: Rc::from(class.name.as_str()),
            namespace,
            bases,
            fields,
        };
        bind(env, class.name.as_str(), Value::Class(Rc::new(value)));
        Ok(())
    }

    /// `Cls(args)`: a new object, its fields bound (a dataclass or `NamedTuple`) or its `__init__`
    /// run.
    pub(crate) fn instantiate_class<'a>(
        &mut self,
        class: &Rc<ClassValue<'a>>,
        args: Args<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        let init = class.find("__init__");
        let parameters: Vec<String> = match (&class.fields, &init) {
            (Some(fields), _) => fields.iter().map(|(name, _)| name.clone()).collect(),
            (None, Some(Value::Function(function))) => match function.body {
                FunctionBody::Def(def) => def
                    .parameters
                    .iter_non_variadic_params()
                    .skip(1)
                    .map(|param| param.name().to_string())
                    .collect(),
                FunctionBody::Lambda(_) => Vec::new(),
            },
            (None, _) => Vec::new(),
        };
        let constructed_with = parameters
            .iter()
            .zip(args.positional.iter().map(|(value, _)| value))
            .chain(args.keywords.iter().map(|(name, value, _)| (name, value)))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let object = Value::Object(Rc::new(ObjectValue {
            class: Rc::clone(class),
            attrs: RefCell::new(FxHashMap::default()),
            constructed_with,
        }));
        if let Some(fields) = &class.fields {
            self.bind_fields(&object, fields, args, span)?;
            if let Some(post_init) = class.find("__post_init__") {
                self.call_bound(post_init, object.clone(), Args::empty(span), span)?;
            }
            return Ok(object);
        }
        if let Some(init) = init {
            self.call_bound(init, object.clone(), args, span)?;
        }
        Ok(object)
    }

    fn bind_fields<'a>(
        &mut self,
        object: &Value<'a>,
        fields: &[(String, Option<Value<'a>>)],
        args: Args<'a>,
        span: Span,
    ) -> Eval<()> {
        let Value::Object(target) = object else {
            return Ok(());
        };
        let mut positional = args.positional.into_iter();
        for (name, default) in fields {
            let value = match positional.next() {
                Some((value, _)) => value,
                None => match args.keywords.iter().find(|(key, ..)| key == name) {
                    Some((_, value, _)) => value.clone(),
                    None => match default {
                        Some(default) => default.clone(),
                        None => {
                            return Err(self.error(
                                Code::InvalidCall,
                                span,
                                format!("missing argument `{name}` for `{}`", target.class.name),
                            ));
                        }
                    },
                },
            };
            target.attrs.borrow_mut().insert(name.clone(), value);
        }
        Ok(())
    }

    /// Calls a function found on a class with `receiver` as its first argument.
    fn call_bound<'a>(
        &mut self,
        function: Value<'a>,
        receiver: Value<'a>,
        mut args: Args<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        args.positional.insert(0, (receiver, span));
        self.call_value(function, args, span)
    }

    /// `object.name`: its own attribute, else its class's, methods bound to it.
    pub(crate) fn object_attribute<'a>(
        &mut self,
        object: &Rc<ObjectValue<'a>>,
        name: &str,
        span: Span,
    ) -> Eval<Value<'a>> {
        if let Some(value) = object.attrs.borrow().get(name) {
            return Ok(value.clone());
        }
        let Some(found) = object.class.find(name) else {
            return Ok(Value::Opaque(Rc::from(format!(
                "`{}.{name}`, an attribute tilec did not see set",
                object.class.name
            ))));
        };
        let receiver = Value::Object(Rc::clone(object));
        Ok(match found {
            Value::Function(_) => bound(found, receiver),
            // A method kernel, seen from driver code: its call records an instance, made with the
            // compile-time arguments this object was made with (`self.N=256`).
            Value::KernelRef { .. } => Value::Partial(Rc::new(Partial {
                function: found,
                positional: Vec::new(),
                keywords: object
                    .constructed_with
                    .iter()
                    .filter(|(_, value)| value.to_const().is_some())
                    .map(|(name, value)| (format!("self.{name}"), value.clone()))
                    .collect(),
            })),
            Value::Method(function, kind) => match MethodKind::from_name(&kind) {
                Some(MethodKind::StaticMethod) => *function,
                Some(MethodKind::ClassMethod) => {
                    bound(*function, Value::Class(Rc::clone(&object.class)))
                }
                Some(MethodKind::Property) => {
                    return self.call_bound(*function, receiver, Args::empty(span), span);
                }
                None => Value::Method(function, kind),
            },
            other => other,
        })
    }

    /// `Cls.name`: what the class body defined; a classmethod is bound to the class.
    pub(crate) fn class_attribute<'a>(
        &mut self,
        class: &Rc<ClassValue<'a>>,
        name: &str,
    ) -> Value<'a> {
        if name == "__name__" {
            return Value::Str(Rc::clone(&class.name));
        }
        match class.find(name) {
            Some(Value::Method(function, kind)) => match MethodKind::from_name(&kind) {
                Some(MethodKind::ClassMethod) => bound(*function, Value::Class(Rc::clone(class))),
                Some(MethodKind::StaticMethod | MethodKind::Property) => *function,
                None => Value::Method(function, kind),
            },
            Some(value) => value,
            None => Value::Opaque(Rc::from(format!(
                "`{}.{name}`, an attribute tilec did not see set",
                class.name
            ))),
        }
    }
}

impl Builder<'_> {
    /// The receiver a method kernel is analysed with when no call gives one: the class itself for
    /// a classmethod, none for a staticmethod, else an object made as the class makes one (its
    /// `__init__` run, or its fields bound) with generic values for what nothing passes. The class
    /// is defined in `globals` on the way.
    pub(crate) fn generic_receiver<'a>(
        &mut self,
        globals: &Env<'a>,
        class: &'a StmtClassDef,
        method: &'a ruff_python_ast::StmtFunctionDef,
        args: &[(String, tilec_ir::ConstValue)],
    ) -> Option<Value<'a>> {
        let strict = std::mem::replace(&mut self.strict, false);
        let defined = self.exec_class(globals, class);
        self.strict = strict;
        defined.ok()?;
        let Some(Value::Class(value)) = lookup(globals, class.name.as_str()) else {
            return None;
        };
        match method_kind(method) {
            Some(MethodKind::StaticMethod) => return None,
            Some(MethodKind::ClassMethod) => return Some(Value::Class(value)),
            Some(MethodKind::Property) | None => {}
        }
        let span = crate::outline::range_span(&class.name);
        // What the call's object was made with (`self.N=256`), else generic values.
        let given: Vec<(String, Value<'a>, Span)> = args
            .iter()
            .filter_map(|(name, value)| {
                let name = name.strip_prefix("self.")?;
                (*value != tilec_ir::ConstValue::RunTime)
                    .then(|| (name.to_owned(), Value::from_const(value), span))
            })
            .collect();
        let is_given = |name: &str| given.iter().any(|(given, ..)| given == name);
        let mut args = match &value.fields {
            Some(fields) => {
                let keywords = fields
                    .iter()
                    .filter(|(name, default)| default.is_none() && !is_given(name))
                    .map(|(name, _)| (name.clone(), self.generic_value(name, None), span))
                    .collect();
                Args {
                    positional: Vec::new(),
                    keywords,
                    span,
                }
            }
            None => {
                let init = class.body.iter().find_map(|stmt| match stmt {
                    Stmt::FunctionDef(def) if def.name.as_str() == "__init__" => Some(def),
                    _ => None,
                });
                let keywords = match (init, value.find("__init__")) {
                    (Some(def), Some(Value::Function(function))) => {
                        self.generic_arguments(&function, def, 1, &is_given, span)
                    }
                    _ => Vec::new(),
                };
                Args {
                    positional: Vec::new(),
                    keywords,
                    span,
                }
            }
        };
        args.keywords.extend(given.iter().cloned());
        // `__init__` is driver code: what it cannot evaluate is only unknown.
        let strict = std::mem::replace(&mut self.strict, false);
        let object = self.instantiate_class(&value, args, span);
        self.strict = strict;
        object.ok()
    }
}

/// A function with its first argument bound, as a method looked up on an object is.
fn bound<'a>(function: Value<'a>, receiver: Value<'a>) -> Value<'a> {
    Value::Partial(Rc::new(Partial {
        function,
        positional: vec![receiver],
        keywords: Vec::new(),
    }))
}

impl MethodKind {
    fn name(self) -> &'static str {
        match self {
            MethodKind::StaticMethod => "staticmethod",
            MethodKind::ClassMethod => "classmethod",
            MethodKind::Property => "property",
        }
    }

    fn from_name(name: &str) -> Option<MethodKind> {
        match name {
            "staticmethod" => Some(MethodKind::StaticMethod),
            "classmethod" => Some(MethodKind::ClassMethod),
            "property" => Some(MethodKind::Property),
            _ => None,
        }
    }
}

/// `@staticmethod`, `@classmethod` or `@property` on a method.
pub(crate) fn method_kind(def: &ruff_python_ast::StmtFunctionDef) -> Option<MethodKind> {
    def.decorator_list.iter().find_map(|decorator| {
        let name = dotted_name(&decorator.expression)?;
        MethodKind::from_name(name.rsplit('.').next().unwrap_or(&name))
    })
}

/// The fields of a dataclass or `NamedTuple`: its bases' first, then each annotated name of its
/// body, with the value assigned to it as the default.
fn class_fields<'a>(
    namespace: &Env<'a>,
    body: &[Stmt],
    bases: &[Rc<ClassValue<'a>>],
) -> Vec<(String, Option<Value<'a>>)> {
    let mut fields: Vec<(String, Option<Value<'a>>)> = bases
        .iter()
        .filter_map(|base| base.fields.clone())
        .flatten()
        .collect();
    for stmt in body {
        let Stmt::AnnAssign(ann) = stmt else { continue };
        let Expr::Name(name) = &*ann.target else {
            continue;
        };
        let name = name.id.as_str();
        // `x: int = field(default=4)` is a default tilec cannot see through: no default.
        let default = ann
            .value
            .as_ref()
            .and_then(|_| lookup(namespace, name))
            .filter(|value| !matches!(value, Value::Opaque(_) | Value::Poison));
        fields.retain(|(existing, _)| existing != name);
        fields.push((name.to_owned(), default));
    }
    fields
}

//! `T.call_extern(dtype, name, *args)` and `T.import_source(source)`: a kernel calls a device
//! function of CUDA source it brings itself. tilec passes both through to the generated CUDA
//! unchanged: it checks the buffers the call touches (a pointer argument may reach any element of
//! its buffer, read or written), but does not model what the function computes, so the emulator
//! cannot run such a kernel.
//!
//! As in TileLang, `dtype=` given by keyword moves to the front (`T.call_extern(name, *args,
//! dtype=d)`). A name or source that tilec cannot know (a value built by another module) is kept
//! as unknown: checking and layouts do not need it, and lowering says that it cannot go on.

use tilec_ir::{Code, EntityKind, ExternArg, ExternCall, Span, TileOp};

use crate::builder::{Builder, Eval, Stop};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    /// `T.call_extern(dtype, name, *args)` as a statement.
    pub(super) fn call_extern<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let first_arg = if args.keyword("dtype").is_some() {
            1
        } else {
            2
        };
        let Some((name_value, name_span)) = args.positional.get(first_arg - 1).cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.call_extern` takes the result's dtype, the function's name and its arguments",
            ));
        };
        let name = self.extern_text(&name_value, name_span, "function name")?;
        if let Some(name) = name
            .as_deref()
            .filter(|name| !tilec_ir::is_extern_name(name))
        {
            return Err(self.error(
                Code::InvalidCall,
                name_span,
                format!("`T.call_extern` calls a function by its C++ name, found {name:?}"),
            ));
        }
        let mut extern_args = Vec::new();
        for (value, span) in args.positional.iter().skip(first_arg) {
            extern_args.push(self.extern_arg(value, *span)?);
        }
        let call = ExternCall {
            name,
            args: extern_args,
        };
        self.add_tile_op(TileOp::ExternCall(call), "`T.call_extern`", args.span)?;
        // A call with a result type (`T.call_extern(T.uint32, "__match_any_sync", ...)`) is
        // also a value, which tilec does not model: using it is not-analysed, never a `None`
        // that the user's arithmetic would be blamed for.
        let result_dtype = match args.keyword("dtype") {
            Some(dtype) => Some(dtype.clone()),
            None => args.positional.first().map(|(value, _)| value.clone()),
        };
        Ok(match result_dtype {
            Some(Value::DType(_)) => Value::Opaque(std::rc::Rc::from(
                "the result of `T.call_extern`, a CUDA function tilec does not model",
            )),
            _ => Value::None,
        })
    }

    /// `T.import_source(source)`: `None` imports nothing, as in TileLang.
    pub(super) fn import_source<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let value = args.get(0, "source").cloned().unwrap_or(Value::None);
        if matches!(value, Value::None) {
            return Ok(Value::None);
        }
        let source = self.extern_text(&value, args.span_of(0, "source"), "source")?;
        let op = TileOp::ImportSource { source };
        self.add_tile_op(op, "`T.import_source`", args.span)?;
        Ok(Value::None)
    }

    /// A string argument, or `None` for a value tilec cannot know (one of another module).
    fn extern_text(&mut self, value: &Value<'_>, span: Span, what: &str) -> Eval<Option<String>> {
        match value {
            Value::Str(text) => Ok(Some(text.to_string())),
            Value::Opaque(_) => Ok(None),
            Value::Poison => Err(Stop),
            other => {
                let found = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    span,
                    format!("the {what} of an extern function is a string, found {found}"),
                ))
            }
        }
    }

    /// One argument: a pointer from `T.access_ptr` (an element of a buffer), else a value.
    fn extern_arg(&mut self, value: &Value<'_>, span: Span) -> Eval<ExternArg> {
        match value {
            Value::Region(region) if region.dims.iter().all(|dim| dim.extent.is_none()) => {
                let reach = self.world.full_region(region.buffer);
                Ok(ExternArg::Pointer {
                    element: region.clone(),
                    reach,
                })
            }
            Value::Buffer(buffer)
                if matches!(
                    self.world.kind(*buffer),
                    Some(EntityKind::Buffer | EntityKind::Param)
                ) =>
            {
                let element = self.world.full_region(*buffer);
                let zero = self.world.exprs.int(0);
                let mut point = element.clone();
                for dim in &mut point.dims {
                    dim.start = zero;
                    dim.extent = None;
                }
                Ok(ExternArg::Pointer {
                    element: point,
                    reach: element,
                })
            }
            other => {
                let (id, _) = self.data_expr(other, span)?;
                Ok(ExternArg::Value(id))
            }
        }
    }
}

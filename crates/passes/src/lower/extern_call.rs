//! `T.call_extern` and `T.import_source`: the user's own device functions, called as written.
//! The call is a statement of each executing thread; the source goes before the kernel in the
//! printed CUDA. A name or source that tilec could not know when it read the kernel (a value
//! built by another module) stops lowering with a `not-analysed` diagnostic at that call.

use tilec_ir::thread::{ExternArg as ThreadArg, Place, Stmt};
use tilec_ir::{EntityId, ExternArg, ExternCall};

use super::{Lowering, Unlowerable};

impl Lowering<'_> {
    pub(super) fn extern_call(
        &mut self,
        entity: EntityId,
        call: &ExternCall,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let Some(name) = call.name.clone() else {
            return Err(Unlowerable::not_analysed(
                entity,
                "the name of the function `T.call_extern` calls is a value tilec cannot know \
                 (it comes from another module), so tilec cannot generate this call",
            ));
        };
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            args.push(match arg {
                ExternArg::Pointer { element, .. } => {
                    let indices: Vec<_> = element.dims.iter().map(|dim| dim.start).collect();
                    let (buffer, index) = self.address(element.buffer, &indices)?;
                    ThreadArg::Pointer(Place { buffer, index })
                }
                ExternArg::Value(value) => ThreadArg::Value(self.value(*value, None)?),
            });
        }
        out.push(Stmt::CallExtern { name, args });
        Ok(())
    }

    /// Records the source for the printer (each text once, in program order).
    pub(super) fn import_source(
        &mut self,
        entity: EntityId,
        source: &Option<String>,
    ) -> Result<(), Unlowerable> {
        let Some(source) = source else {
            return Err(Unlowerable::not_analysed(
                entity,
                "the CUDA source of `T.import_source` is a value tilec cannot know (it comes \
                 from another module), so tilec cannot generate the code that calls into it",
            ));
        };
        if !self.program.extern_sources.contains(source) {
            self.program.extern_sources.push(source.clone());
        }
        Ok(())
    }
}

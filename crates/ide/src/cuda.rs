//! The CUDA an editor shows for a kernel instance: the text of the `db` query that prints it (per
//! instance and target), or why there is none, in words the editor can show as an error.

use tilec_db::{Db, Instance, cuda_source, lowering_diagnostics, thread_programs_for};
use tilec_ir::Target;

/// The CUDA C++ of every launch of `instance` lowered for `target`, in launch order; `Err` says
/// why the instance cannot be lowered (its lowering diagnostics, else where the reason is).
pub fn cuda_text(db: &dyn Db, instance: Instance<'_>, target: Target) -> Result<String, String> {
    if let Some(sources) = cuda_source(db, instance, target) {
        return Ok(sources.concat());
    }
    let failures = match thread_programs_for(db, instance, target).as_ref() {
        Ok(_) => &[][..],
        Err(failures) => failures.as_slice(),
    };
    let mut reasons: Vec<String> = lowering_diagnostics(db, instance)
        .iter()
        .map(|d| format!("{}: {}", d.code.name(), d.message))
        .chain(
            failures
                .iter()
                .map(|d| format!("{}: {}", d.code.name(), d.message)),
        )
        .collect();
    reasons.dedup();
    // A kernel that does not evaluate (a syntax error being typed, say) has no lowering
    // diagnostic of its own: say where the reason is rather than an empty one.
    let reasons = match reasons.is_empty() {
        true => "its analysis stops on the errors in the Problems panel".to_owned(),
        false => reasons.join("; "),
    };
    Err(format!(
        "`{}` cannot be lowered to CUDA yet: {reasons}",
        instance.kernel(db).name(db),
    ))
}

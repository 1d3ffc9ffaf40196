//! Temporaries for values a statement uses more than once.
//!
//! Values print inline, but a value node can be an operand of several others: lowering builds a
//! maximum as `acc > x ? acc : x` on the previous `acc`, so a chain of them printed inline doubles
//! at every step. Before a statement, every compound value that the statement evaluates
//! unconditionally and uses twice or more is declared as a `const` temporary, in value order (an
//! operand always precedes its users), and the statement refers to it by name. A long chain of
//! single-use values is cut into temporaries too, so that no printed expression nests deeply.
//!
//! This changes nothing the program computes: values have no side effects, and a value evaluated
//! unconditionally by the statement is evaluated once either way (the emulator memoizes it per
//! statement). Values only under one side of a `Select` stay inline, because C evaluates only the
//! side the condition picks, and a guarded load there must not run for the other threads.

use rustc_hash::{FxHashMap, FxHashSet};
use tilec_ir::thread::{Value, ValueId};

use super::Printer;
use super::types::compute_type;

/// Nesting of inline operators after which a single-use value is still declared on its own.
const MAX_INLINE_DEPTH: u32 = 48;

/// The operands of a value node: `(operand, evaluated unconditionally)`.
fn operands(value: &Value) -> Vec<(ValueId, bool)> {
    match *value {
        Value::Float { .. }
        | Value::Int { .. }
        | Value::Index(_)
        | Value::Load { .. }
        | Value::Random(_) => vec![],
        Value::Shuffle { .. } => value.operands().map(|op| (op, true)).collect(),
        Value::Unary { arg, .. } => vec![(arg, true)],
        Value::Cast { value, .. } | Value::ShuffleXor { value, .. } => vec![(value, true)],
        Value::Binary { lhs, rhs, .. } | Value::Compare { lhs, rhs, .. } => {
            vec![(lhs, true), (rhs, true)]
        }
        Value::Select {
            cond,
            then,
            otherwise,
            ..
        } => vec![(cond, true), (then, false), (otherwise, false)],
    }
}

/// Whether printing the node takes an operator (constants, loads and indices are cheap to repeat).
fn is_compound(value: &Value) -> bool {
    !operands(value).is_empty()
}

/// Whether the node has an effect: a random draw, which must be printed exactly where and as
/// often as the emulator evaluates it.
fn is_draw(value: &Value) -> bool {
    matches!(value, Value::Random(_))
}

impl Printer<'_> {
    /// Declares the temporaries of the statement whose value is `root`; the statement then prints
    /// them by name until [`Printer::forget_temporaries`].
    pub(super) fn declare_temporaries(&mut self, root: ValueId) {
        let (uses, unconditional) = self.value_uses(root);
        // Every draw the statement makes unconditionally is declared, in value order, so that C
        // draws in the order the emulator does (C leaves the order of operands unspecified).
        let is_draw_id = |id: ValueId| self.program.values.get(id.index()).is_some_and(is_draw);
        let mut chosen: Vec<ValueId> = unconditional
            .iter()
            .copied()
            .filter(|&id| {
                id != root && (uses.get(&id).copied().unwrap_or(0) >= 2 || is_draw_id(id))
            })
            .collect();
        chosen.extend(self.deep_values(root, &unconditional, &chosen));
        chosen.sort_unstable();
        chosen.dedup();
        for id in chosen {
            // A statement past its budget is reported when its value is printed.
            if self.budget == 0 {
                break;
            }
            self.declare_temporary(id);
        }
    }

    /// Ends the temporaries of the statement just printed.
    pub(super) fn forget_temporaries(&mut self) {
        self.temporaries.clear();
    }

    fn declare_temporary(&mut self, id: ValueId) {
        let (expr, dtype) = self.root_value(id);
        let name = self.names.fresh(&format!("v{}", id.index()));
        let ty = compute_type(dtype);
        self.line(&format!("const {ty} {name} = {};", expr.text));
        self.temporaries.insert(id, name);
    }

    /// For every value reachable from `root`, how many value nodes use it, and the compound values
    /// the statement evaluates unconditionally. Each node is expanded at most twice (once reached
    /// through a `Select` side, once unconditionally), so this is linear in the program's values.
    fn value_uses(&self, root: ValueId) -> (FxHashMap<ValueId, u32>, FxHashSet<ValueId>) {
        let values = &self.program.values;
        let mut uses: FxHashMap<ValueId, u32> = FxHashMap::default();
        let mut expanded = FxHashSet::default();
        let mut unconditional = FxHashSet::default();
        let mut stack = vec![(root, true)];
        while let Some((id, eager)) = stack.pop() {
            let Some(value) = values.get(id.index()) else {
                continue;
            };
            // Operands precede their users; anything else is reported when printed.
            let valid = operands(value).into_iter().filter(|&(op, _)| op < id);
            let newly_eager = eager && unconditional.insert(id);
            if expanded.insert(id) {
                for (op, op_eager) in valid {
                    *uses.entry(op).or_insert(0) += 1;
                    stack.push((op, eager && op_eager));
                }
            } else if newly_eager {
                stack.extend(valid.filter(|&(_, e)| e).map(|(op, _)| (op, true)));
            }
        }
        unconditional.retain(|id| {
            values
                .get(id.index())
                .is_some_and(|value| is_compound(value) || is_draw(value))
        });
        (uses, unconditional)
    }

    /// Unconditional values to declare so that no inline chain of operators nests deeper than
    /// [`MAX_INLINE_DEPTH`], given the values already `chosen`. Values are visited in id order,
    /// which puts every operand before its users.
    fn deep_values(
        &self,
        root: ValueId,
        unconditional: &FxHashSet<ValueId>,
        chosen: &[ValueId],
    ) -> Vec<ValueId> {
        let chosen: FxHashSet<ValueId> = chosen.iter().copied().collect();
        let mut ids: Vec<ValueId> = unconditional.iter().copied().collect();
        ids.sort_unstable();
        let mut depth: FxHashMap<ValueId, u32> = FxHashMap::default();
        let mut deep = Vec::new();
        for id in ids {
            let value = &self.program.values[id.index()];
            let below = operands(value)
                .into_iter()
                .filter(|&(op, _)| op < id && !chosen.contains(&op))
                .map(|(op, _)| depth.get(&op).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
            let here = below + 1;
            if here >= MAX_INLINE_DEPTH && id != root {
                deep.push(id);
                depth.insert(id, 0);
            } else {
                depth.insert(id, here);
            }
        }
        deep
    }
}

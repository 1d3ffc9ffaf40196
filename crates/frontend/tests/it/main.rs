//! The front end's integration tests, folded into one test binary: `driver` (the whole front end
//! over small files) and `dsl` (the entities and formulas of the TileLang surface).

mod driver;
mod dsl;

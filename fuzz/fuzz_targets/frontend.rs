//! libFuzzer target: any UTF-8 text as a TileLang file, through parsing, instance finding, the
//! meta-evaluator, the checks and layout inference (every diagnostic of the file). A panic, an
//! abort or a run past libFuzzer's time and memory limits is a finding; diagnostics are not.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tilec_db::{RootDatabase, SourceFile};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let db = RootDatabase::default();
    let file = SourceFile::new(&db, "fuzz.py".into(), text.to_owned(), Vec::new());
    let _ = tilec_db::file_diagnostics(&db, file);
});

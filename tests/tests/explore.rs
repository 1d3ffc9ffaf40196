use tilec_tests::*;
#[test]
fn explore() {
    let dir = corpus_dir().expect("corpus");
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("d") { let p = entry.expect("e").path(); if p.extension().is_some_and(|e| e == "py") { names.push(p.file_name().expect("n").to_string_lossy().into_owned()); } }
    for entry in std::fs::read_dir(dir.join("errors")).expect("d") { let p = entry.expect("e").path(); names.push(format!("errors/{}", p.file_name().expect("n").to_string_lossy())); }
    names.sort();
    for name in names {
        let (db, file) = load_corpus(&dir, &name);
        let diags = run_pipeline(&db, file);
        println!("===== {name}: {} instances", tilec_db::instances(&db, file).len());
        for r in tilec_db::instance_reports(&db, file) { println!("  report {} #{} {:?} errors={}", r.kernel, r.index, r.args, r.has_errors); }
        println!("{}", describe_all(&db, file, &diags));
        if std::env::var("WORLDS").is_ok() { for &i in tilec_db::instances(&db, file) { println!("{}", tilec_db::kernel_world(&db, i).pretty()); } }
    }
}

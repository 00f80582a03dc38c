//! `tact demo` runs end to end, prints its table, and cleans up after itself. No timing
//! assertions: the numbers depend on the machine and its load.

use std::process::Command;

#[test]
fn demo_prints_the_table_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tact"))
        .args(["demo", "--length", "2s", "--dir"])
        .arg(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("xdg-state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tact demo failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );

    let header = stdout
        .lines()
        .position(|l| l.starts_with("scenario") && l.contains("slowdown"));
    let header = header.unwrap_or_else(|| panic!("no table header in:\n{stdout}"));
    let rows: Vec<&str> = stdout.lines().skip(header + 1).take(4).collect();
    let expected = [
        "foreground alone",
        "+ background, unregulated",
        "+ background, nice -n 19",
        "+ background, tact run --polite",
    ];
    for (row, name) in rows.iter().zip(expected) {
        assert!(
            row.starts_with(name),
            "expected a row for `{name}`, got `{row}` in:\n{stdout}"
        );
        assert!(row.contains('x'), "row without a slowdown: `{row}`");
    }
    assert_eq!(rows.len(), 4, "expected four scenario rows in:\n{stdout}");

    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "xdg-state")
        .collect();
    assert!(
        left.is_empty(),
        "tact demo left scratch files behind: {left:?}"
    );
}

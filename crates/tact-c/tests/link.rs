//! Builds C programs against `libtact.a` and `tact.h` with the system C compiler (the one rustc
//! links with) and runs them under regulation.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What a Rust static library needs from the system (`rustc --print native-static-libs`).
const NATIVE_LIBS: [&str; 6] = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"];

/// `libtact.a` of this build: cargo builds the package's library (see Cargo.toml) into the
/// `deps/` directory that holds this test, and `cargo build` copies it one level up.
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let deps = exe.parent().expect("target/<profile>/deps");
    [deps, deps.parent().unwrap_or(deps)]
        .iter()
        .map(|dir| dir.join("libtact.a"))
        .find(|lib| lib.exists())
        .unwrap_or_else(|| panic!("no libtact.a in {}", deps.display()))
}

/// Compiles `source` into `out` against libtact; panics with the compiler's messages.
fn compile(source: &Path, out: &Path) {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let built = Command::new("cc")
        .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&include)
        .arg(source)
        .arg(static_lib())
        .args(NATIVE_LIBS)
        .arg("-o")
        .arg(out)
        .output()
        .expect("cannot run cc");
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
}

fn run(program: &Path, args: &[&Path], state: &Path) -> Output {
    Command::new(program)
        .args(args)
        .env("TACT_TESTPOINT", "20ms")
        .env("TACT_STATE_DIR", state)
        .env_remove("TACT_NAME")
        .env_remove("TACT_DISABLE")
        .output()
        .expect("cannot run the compiled program")
}

/// CRC-32 (IEEE), as the example computes it.
fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |mut crc, &b| {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
        crc
    })
}

#[test]
fn the_copy_example_runs_regulated_and_saves_its_targets() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/copy.c");
    compile(&example, &copy);

    // 16 MiB of xorshift noise: a few tenths of a second of bitwise CRC, many testpoints.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<u8> = (0..16 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let (src, dst, state) = (
        dir.path().join("src"),
        dir.path().join("dst"),
        dir.path().join("state"),
    );
    fs::write(&src, &data).unwrap();
    let out = run(&copy, &[&src, &dst], &state);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!("copied {} bytes, crc32 {:08x}", data.len(), crc32(&data))
    );
    assert!(fs::read(&dst).unwrap() == data, "the copy differs");

    // Saved at exit, under the executable's name and a hash of its path.
    let files: Vec<PathBuf> = fs::read_dir(state.join("polite"))
        .expect("no targets directory")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("copy-") && name.ends_with("-lib.json"),
        "{name}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(saved["progress"], serde_json::json!(["testpoint"]));
    assert!(saved["targets"]["targets"]["0"]["rate"].as_f64().unwrap() > 0.0);
}

/// Every error code of tact.h, from C.
const ERRORS_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include "tact.h"

int main(void)
{
    int64_t one = 1, negative = -5, two[2] = {1, 2};
    if (strcmp(tact_last_error(), "") != 0) return 10;
    if (tact_testpoint(0, 0, &one) != TACT_EINVAL) return 11;
    if (tact_testpoint(-1, 1, &one) != TACT_EINVAL) return 12;
    if (tact_testpoint(0, TACT_MAX_METRICS + 1, &one) != TACT_EINVAL) return 13;
    if (tact_testpoint(0, 1, NULL) != TACT_EINVAL) return 14;
    if (strstr(tact_last_error(), "NULL") == NULL) return 15;
    if (tact_testpoint(0, 1, &one) != TACT_OK) return 16;
    if (tact_testpoint(0, 1, &negative) != TACT_EPROGRESS) return 17;
    if (tact_testpoint(0, 2, two) != TACT_EPROGRESS) return 18;
    printf("%s\n", tact_last_error());
    if (tact_set_priority(2) != TACT_OK) return 19;
    if (tact_flush() != TACT_OK) return 20;
    /* The daemon's range, -100 to 100: refused at once rather than by the daemon later. */
    if (tact_set_priority(1000) != TACT_EINVAL) return 21;
    if (strstr(tact_last_error(), "-100 to 100") == NULL) return 22;
    if (tact_set_priority(-101) != TACT_EINVAL) return 23;
    if (tact_set_priority(-100) != TACT_OK || tact_set_priority(100) != TACT_OK) return 24;
    return 0;
}
"#;

#[test]
fn errors_come_back_as_codes_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let (source, program) = (dir.path().join("errors.c"), dir.path().join("errors"));
    fs::write(&source, ERRORS_C).unwrap();
    compile(&source, &program);
    let out = run(&program, &[], &dir.path().join("state"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "index 0 was given 2 metrics, but earlier 1"
    );
}

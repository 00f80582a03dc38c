//! C ABI of tact's in-process regulation (`include/tact.h`): the paper's
//! `Testpoint(index, count, metrics)` over [`tact_lib`].
//!
//! Every entry point catches panics (none may cross into C) and reports failures as negative
//! return codes, with the message in a thread-local string for `tact_last_error`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, UnwindSafe};

const TACT_OK: c_int = 0;
const TACT_EINVAL: c_int = -1;
const TACT_EPROGRESS: c_int = -2;
const TACT_ESAVE: c_int = -3;
const TACT_EINTERNAL: c_int = -4;
/// `TACT_MAX_METRICS`: a bound on what a count may claim, so that a garbage count is refused
/// rather than read far past the caller's array.
const MAX_METRICS: usize = 64;
/// Metrics converted on the stack; more (rare) take an allocation.
const ON_STACK: usize = 8;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// # Safety
/// `metrics` must point to `count` readable `int64_t` values (checked for NULL and count range).
#[no_mangle]
pub unsafe extern "C" fn tact_testpoint(index: c_int, count: c_int, metrics: *const i64) -> c_int {
    let (Ok(index), Ok(count)) = (u32::try_from(index), usize::try_from(count)) else {
        return fail(TACT_EINVAL, "index and count must not be negative");
    };
    if count == 0 || count > MAX_METRICS {
        return fail(
            TACT_EINVAL,
            &format!("count must be 1 to {MAX_METRICS}, got {count}"),
        );
    }
    if metrics.is_null() {
        return fail(TACT_EINVAL, "metrics is NULL");
    }
    // SAFETY: non-null, and the caller promises `count` values (bounded above).
    let metrics = unsafe { std::slice::from_raw_parts(metrics, count) };
    guarded(|| {
        let result = if count <= ON_STACK {
            let mut buf = [0.0; ON_STACK];
            for (b, m) in buf.iter_mut().zip(metrics) {
                *b = *m as f64;
            }
            tact_lib::testpoint(index, &buf[..count])
        } else {
            let buf: Vec<f64> = metrics.iter().map(|&m| m as f64).collect();
            tact_lib::testpoint(index, &buf)
        };
        match result {
            Ok(()) => TACT_OK,
            Err(e @ tact_lib::Error::Progress(_)) => fail(TACT_EPROGRESS, &e.to_string()),
            Err(e) => fail(TACT_EINTERNAL, &e.to_string()),
        }
    })
}

#[no_mangle]
pub extern "C" fn tact_set_priority(priority: c_int) -> c_int {
    guarded(|| match tact_lib::set_priority(priority) {
        Ok(()) => TACT_OK,
        Err(e) => fail(TACT_EINVAL, &e.to_string()),
    })
}

#[no_mangle]
pub extern "C" fn tact_flush() -> c_int {
    guarded(|| match tact_lib::flush() {
        Ok(()) => TACT_OK,
        Err(e) => fail(TACT_ESAVE, &e.to_string()),
    })
}

#[no_mangle]
pub extern "C" fn tact_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        // The thread is exiting: a static empty string.
        .unwrap_or(c"".as_ptr())
}

/// Runs `f`, turning a panic into `TACT_EINTERNAL`.
fn guarded(f: impl FnOnce() -> c_int + UnwindSafe) -> c_int {
    catch_unwind(f).unwrap_or_else(|_| fail(TACT_EINTERNAL, "internal error in libtact (panic)"))
}

/// Records `message` for `tact_last_error` and returns `code`.
fn fail(code: c_int, message: &str) -> c_int {
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // Outside of a thread's life there is nowhere to keep it; the code still says what failed.
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = message);
    code
}

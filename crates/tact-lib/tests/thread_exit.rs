//! The process-wide supervisor and per-thread units (`tact_lib::testpoint`): threads take turns,
//! and a thread that exits while holding the token frees it. One test per file: the supervisor is
//! process-wide.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn thread_units_take_turns_and_an_exiting_holder_frees_the_token() {
    // Only the exit can free the token within the test: H is a minute.
    tact_lib::init(common::with_hung(100_000, Duration::from_secs(60))).unwrap();
    assert!(matches!(
        tact_lib::init(common::config(1)),
        Err(tact_lib::Error::AlreadyStarted)
    ));

    // Turns: never two threads between testpoints at once.
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let until = Instant::now() + Duration::from_millis(500);
    let workers: Vec<_> = (0..2)
        .map(|i| {
            let (inside, most) = (inside.clone(), most.clone());
            thread::spawn(move || {
                tact_lib::set_priority(0).unwrap();
                while Instant::now() < until {
                    tact_lib::testpoint(i, &[1.0]).unwrap();
                    most.fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    thread::sleep(Duration::from_micros(500));
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
                tact_lib::stats().unwrap().testpoints
            })
        })
        .collect();
    for w in workers {
        assert!(w.join().unwrap() > 0);
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "two threads ran at once");
    let sup = tact_lib::supervisor().unwrap();
    assert_eq!(sup.units(), 0, "exited threads unregistered");

    // A thread takes the token and exits with it.
    let (holding, on_holding) = mpsc::channel();
    let holder = thread::spawn(move || {
        tact_lib::testpoint(7, &[1.0]).unwrap();
        holding.send(()).unwrap();
        thread::sleep(Duration::from_millis(100));
    });
    on_holding.recv().unwrap();
    let asked = Instant::now();
    tact_lib::testpoint(0, &[1.0]).unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "{:?}",
        asked.elapsed()
    );
    holder.join().unwrap();
    assert_eq!(sup.units(), 1);
    assert!(tact_lib::stats().is_some());
    assert!(tact_lib::flush().is_ok());
}

/*
 * tact.h: in-process polite regulation for C programs (libtact, the MS Manners library of
 * Douceur & Bolosky, SOSP 1999).
 *
 * A low-importance program (backup, indexing, compression) calls tact_testpoint() regularly,
 * ideally every few tens of milliseconds, with the progress it made since its previous call.
 * The call returns at once most of the time. When a testpoint is due (every testpoint period of
 * running, 200 ms by default), tact compares the thread's progress rate with a target it
 * calibrated itself, and the call BLOCKS while the program should defer:
 *   - while the rate is significantly below target, which means the program contends with more
 *     important work (the suspension doubles with each consecutive poor verdict, up to 60 s);
 *   - while another regulated thread of the process has its turn: only one regulated thread
 *     runs at a time, since regulated threads that run together slow each other down. A thread
 *     keeps its turn until its next due testpoint. Threads that never call tact_testpoint are
 *     not regulated.
 * A thread that does not reach a due testpoint within the hung threshold (10 s by default) loses
 * its turn to the others, and that long interval is not judged.
 *
 * Calibrated targets persist per program and metric-set index: they load at the first
 * testpoint and are saved every 5 minutes, at exit (atexit) and on tact_flush(), in
 * $XDG_STATE_HOME/tact/polite/<key>.json (default ~/.local/state/tact/polite/).
 *
 * Environment (read at the first call; a bad value is reported on stderr and ignored):
 *   TACT_TESTPOINT  testpoint period, e.g. "100ms" (1ms to 60s; default 200ms)
 *   TACT_NAME       persistence key (default: the executable's name and a hash of its path)
 *   TACT_STATE_DIR  directory holding polite/<key>.json (instead of $XDG_STATE_HOME/tact)
 *   TACT_DISABLE    "1" turns regulation off: tact_testpoint() returns TACT_OK at once
 *                   without looking at the metrics (argument checks still apply)
 *
 * All functions are thread-safe and never abort the program.
 *
 * Linking: the static library needs the system libraries Rust's standard library uses,
 *   cc prog.c -I crates/tact-c/include target/release/libtact.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl
 * the shared one nothing more: cc prog.c -I crates/tact-c/include -L target/release -ltact
 */
#ifndef TACT_H
#define TACT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define TACT_OK 0
/* Bad arguments: index < 0, count < 1 or > TACT_MAX_METRICS, metrics == NULL, or a priority
 * outside TACT_PRIORITY_MIN..TACT_PRIORITY_MAX. */
#define TACT_EINVAL (-1)
/* Bad progress: a negative metric, or a count other than earlier calls gave for this index. */
#define TACT_EPROGRESS (-2)
/* tact_flush() could not write the targets file. */
#define TACT_ESAVE (-3)
/* An internal error in libtact (a bug: please report it with tact_last_error()). */
#define TACT_EINTERNAL (-4)

/* Most metrics one index may have. */
#define TACT_MAX_METRICS 64

/* The priorities tact_set_priority() accepts (those of the tact daemon's protocol). */
#define TACT_PRIORITY_MIN (-100)
#define TACT_PRIORITY_MAX 100

/*
 * Reports progress and returns when the calling thread may go on (see above: it may block).
 *
 * index:   the metric set, >= 0. A program that works in phases uses one index per phase; one
 *          that progresses along several dimensions at once passes several metrics per index.
 *          Each index keeps the number of metrics of its first call.
 * count:   number of metrics, 1 to TACT_MAX_METRICS.
 * metrics: progress INCREMENTS since the previous call (bytes copied, items indexed...), >= 0.
 *          The first call of a thread registers it; its increments are not judged.
 *
 * Returns TACT_OK, TACT_EINVAL or TACT_EPROGRESS (nothing is recorded then; the message is in
 * tact_last_error()), or TACT_EINTERNAL.
 */
int tact_testpoint(int index, int count, const int64_t *metrics);

/*
 * Sets the calling thread's priority among the regulated threads of the process (default 0).
 * A higher priority always runs first when it is not suspended; equal priorities share
 * execution time equally. With a tact daemon, the process's turn among the machine's jobs is
 * asked with the priority of its thread that runs. Returns TACT_OK; TACT_EINVAL for a priority
 * outside TACT_PRIORITY_MIN..TACT_PRIORITY_MAX (-100 to 100; nothing is changed); or
 * TACT_EINTERNAL.
 */
int tact_set_priority(int priority);

/*
 * Saves the calibrated targets now (they are also saved periodically and at exit).
 * Returns TACT_OK, TACT_ESAVE, or TACT_EINTERNAL.
 */
int tact_flush(void);

/*
 * The message of the last failed call on the calling thread ("" if none). The string belongs
 * to libtact and stays valid until the next failed call on this thread.
 */
const char *tact_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TACT_H */

//! tune-service: the benchmark's web tier (spec concurrency.md §5). A loopback TCP server with a
//! thread per connection; each request spins a Pareto-distributed service time in thread CPU
//! time, does its mode's extra work, then waits out a Pareto-distributed delay on a timer, then
//! replies. Pinned to one core, the spinning makes that core the bottleneck: throughput grows with
//! concurrency while the delays overlap, then flattens once the core is busy (the knee).
//!
//! Prints `listening ADDR` on stdout once it accepts connections (`--listen 127.0.0.1:0` picks a
//! free port; in a network namespace, the namespace's address). Protocol: `tact_bench_tune::protocol`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use tact_bench_tune::cputime::{process_cpu, spin};
use tact_bench_tune::mode::{Extra, Mode};
use tact_bench_tune::pareto::{Pareto, SHAPE};
use tact_bench_tune::protocol::{work_reply, Request, ServiceStats};
use tact_sim::SimRng;

#[derive(Parser, Debug)]
#[command(
    name = "tune-service",
    about = "The tune benchmark's service: a throughput knee on one core"
)]
struct Args {
    /// Address to listen on (port 0: any free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Mean service time per request, ms of thread CPU time (Pareto, k = 2.5).
    #[arg(long, default_value_t = 1.3)]
    service_ms: f64,
    /// Mean delay per request after the service time, ms on a timer (Pareto, k = 2.5).
    #[arg(long, default_value_t = 5.0)]
    delay_ms: f64,
    /// Seed of the service-time and delay streams (one stream per connection).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Extra work per request: cpu, memory:MiB or disk:FILE (switch at run time with `M SPEC`).
    #[arg(long, default_value = "cpu")]
    mode: String,
    /// Padding bytes per reply, so that replies can fill a shaped link (spec X4: 64 KiB).
    #[arg(long, default_value_t = 0)]
    reply_bytes: usize,
}

struct Shared {
    service: Duration,
    delay: Duration,
    seed: u64,
    mode: RwLock<(Mode, Arc<Extra>)>,
    requests: AtomicU64,
    /// The reply to `R`, padding included (`protocol::work_reply`).
    reply: String,
}

fn ms(name: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v < 0.0 {
        return Err(anyhow!(
            "--{name} = {v}: must be a non-negative number of ms"
        ));
    }
    Ok(Duration::from_secs_f64(v / 1000.0))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mode: Mode = args
        .mode
        .parse()
        .map_err(|e: String| anyhow!("--mode: {e}"))?;
    let extra = Extra::open(&mode).context("--mode")?;
    let shared = Arc::new(Shared {
        service: ms("service-ms", args.service_ms)?,
        delay: ms("delay-ms", args.delay_ms)?,
        seed: args.seed,
        mode: RwLock::new((mode, Arc::new(extra))),
        requests: AtomicU64::new(0),
        reply: work_reply(args.reply_bytes),
    });
    let listener =
        TcpListener::bind(&args.listen).with_context(|| format!("bind {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("listening {addr}");
    std::io::stdout().flush()?;
    for (i, stream) in listener.incoming().enumerate() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                eprintln!("tune-service: accept: {e}");
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("conn-{i}"))
            .spawn(move || {
                if let Err(e) = serve(stream, i as u64, &shared) {
                    eprintln!("tune-service: connection {i}: {e:#}");
                }
            })
            .context("spawn a connection thread")?;
    }
    Ok(())
}

/// Serves one connection until the client closes it.
fn serve(stream: TcpStream, conn: u64, shared: &Shared) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut out = stream.try_clone()?;
    let mut input = BufReader::new(stream);
    // Independent streams per connection and per purpose, so a run's draws depend only on the
    // seed and on which connection a request came through.
    let mut service = Pareto::new(shared.service, SHAPE, SimRng::stream(shared.seed, 3 * conn));
    let mut delay = Pareto::new(
        shared.delay,
        SHAPE,
        SimRng::stream(shared.seed, 3 * conn + 1),
    );
    let mut extra_rng = SimRng::stream(shared.seed, 3 * conn + 2);
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let reply = match Request::parse(&line) {
            Ok(Request::Work) => {
                let extra = Arc::clone(&shared.mode.read().expect("mode lock").1);
                spin(service.draw());
                match extra.run(&mut extra_rng, conn) {
                    Ok(()) => {
                        std::thread::sleep(delay.draw());
                        shared.requests.fetch_add(1, Ordering::Relaxed);
                        shared.reply.clone()
                    }
                    Err(e) => format!("E {e}\n"),
                }
            }
            Ok(Request::Stats) => ServiceStats {
                cpu: process_cpu(),
                requests: shared.requests.load(Ordering::Relaxed),
                mode: shared.mode.read().expect("mode lock").0.to_string(),
            }
            .line(),
            Ok(Request::Mode(spec)) => match switch(shared, &spec) {
                Ok(()) => "K\n".to_string(),
                Err(e) => format!("E {e}\n"),
            },
            Err(e) => format!("E {e}\n"),
        };
        out.write_all(reply.as_bytes())?;
    }
}

fn switch(shared: &Shared, spec: &str) -> Result<(), String> {
    let mode: Mode = spec.parse()?;
    let extra = Extra::open(&mode).map_err(|e| e.to_string())?;
    eprintln!("tune-service: mode {mode}");
    *shared.mode.write().expect("mode lock") = (mode, Arc::new(extra));
    Ok(())
}

//! The `tact tickets` subcommands that ask the daemon: create, destroy, fund, unfund, set, show,
//! attach, detach, offer, accept, offers, cancel, and explain of an attached process. Each sends one
//! request (`docs/protocol.md`, the `tickets_*` operations) and prints the reply; a refusal
//! prints the daemon's message and exits 1, or 2 for malformed input.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tact_core::tickets::Resource;
use tact_proto::tickets::{
    Amount, Changed, Explain, Knob, OfferResult, OfferView, Offers, Rights, Show, TicketsRequest,
};
use tact_proto::{Client, ClientError, ErrorCode};

use super::setup::parse_size;
use super::show::{table, HOP_HEADER};
use crate::cli::TicketsCommand;

/// Exit status of a request the daemon refused (or when no daemon runs).
const REFUSED: i32 = 1;
/// Exit status of malformed input, ours or as the daemon judged it (as for a bad command line).
const MALFORMED: i32 = crate::cli::USAGE_FAILED as i32;

/// Runs a daemon subcommand; `None` for the offline ones (check, explain of a setup, run).
pub fn run(command: &TicketsCommand, page_size: u64) -> Option<Result<i32>> {
    use TicketsCommand as C;
    let input = |r: Result<Action, String>| match r {
        Ok(action) => action,
        Err(e) => Action::Malformed(e),
    };
    let (socket, action) = match command {
        C::Check { .. } | C::Run(_) => return None,
        C::Explain { job: Some(_), .. } => return None,
        C::Explain {
            target,
            json,
            socket,
            job: None,
        } => (
            socket,
            input(pid(target).map(|pid| Action::Explain { pid, json: *json })),
        ),
        C::Create {
            name,
            owner,
            group,
            mode,
            socket,
        } => (
            socket,
            Action::Change(TicketsRequest::Create {
                name: name.clone(),
                owner: *owner,
                group: *group,
                mode: Some(*mode),
            }),
        ),
        C::Destroy { currency, socket } => (
            socket,
            Action::Change(TicketsRequest::Destroy {
                currency: currency.clone(),
            }),
        ),
        C::Fund {
            holder,
            from,
            cpu,
            disk,
            mem,
            hard,
            socket,
        } => (
            socket,
            input(amounts(*cpu, *disk, mem, page_size).map(|amounts| {
                // Clap lets exactly one through.
                let (resource, amount) = amounts.into_iter().next().expect("one amount");
                Action::Fund(TicketsRequest::Fund {
                    holder: holder.clone(),
                    issuer: from.clone(),
                    resource,
                    amount,
                    hard: *hard,
                })
            })),
        ),
        C::Unfund { ticket, socket } => (
            socket,
            input(
                id(ticket, 't', "ticket")
                    .map(|ticket| Action::Change(TicketsRequest::Unfund { ticket })),
            ),
        ),
        C::Set {
            ticket,
            amount,
            socket,
        } => (
            socket,
            input(id(ticket, 't', "ticket").and_then(|ticket| {
                let amount = parse_size(amount, page_size)?;
                Ok(Action::Change(TicketsRequest::Set { ticket, amount }))
            })),
        ),
        C::Show {
            currency,
            json,
            socket,
        } => (
            socket,
            Action::Show {
                currency: currency.clone(),
                json: *json,
            },
        ),
        C::Attach {
            pid,
            from,
            cpu,
            disk,
            mem,
            socket,
        } => (
            socket,
            input(amounts(*cpu, *disk, mem, page_size).map(|amounts| {
                Action::Attach(TicketsRequest::Attach {
                    pid: *pid,
                    from: from.clone(),
                    amounts,
                })
            })),
        ),
        C::Detach { pid, socket } => (socket, Action::Change(TicketsRequest::Detach { pid: *pid })),
        C::Offer {
            pid,
            give,
            want,
            expires,
            socket,
        } => (
            socket,
            input((|| {
                Ok(Action::Offer(TicketsRequest::Offer {
                    pid: *pid,
                    give: trade(give, "--give", page_size)?,
                    want: trade(want, "--want", page_size)?,
                    expires_ms: expires.map(|d| d.as_millis().max(1) as u64),
                }))
            })()),
        ),
        C::Accept {
            offer,
            pid: taker,
            socket,
        } => (
            socket,
            input(id(offer, 'o', "offer").map(|offer| Action::Accept { pid: *taker, offer })),
        ),
        C::Offers { json, socket } => (socket, Action::Offers { json: *json }),
        C::Cancel { id: target, socket } => (socket, input(cancel(target))),
    };
    Some(perform(&socket.socket, action))
}

/// What to ask, and how to print the reply.
enum Action {
    Malformed(String),
    /// A change whose reply says only what it undid.
    Change(TicketsRequest),
    Fund(TicketsRequest),
    Attach(TicketsRequest),
    Offer(TicketsRequest),
    /// Offer `pid` the mirror of queued offer `offer`.
    Accept {
        pid: i32,
        offer: u64,
    },
    Show {
        currency: Option<String>,
        json: bool,
    },
    Offers {
        json: bool,
    },
    Explain {
        pid: i32,
        json: bool,
    },
}

fn perform(socket: &Option<std::path::PathBuf>, action: Action) -> Result<i32> {
    if let Action::Malformed(e) = action {
        eprintln!("tact: {e}");
        return Ok(MALFORMED);
    }
    let path = tact_proto::socket_path(socket.as_deref())?;
    let mut client = match Client::connect(&path) {
        Ok(client) => client,
        Err(e) if e.no_daemon() => {
            eprintln!(
                "tact: no daemon is running at {}; start one with `tact daemon` (it holds the \
                 tickets model), or point --socket at a running one",
                path.display()
            );
            return Ok(REFUSED);
        }
        Err(e) => return Err(e.into()),
    };
    let result = match action {
        Action::Malformed(_) => unreachable!("handled above"),
        Action::Change(request) => ask(&mut client, request, |c: Changed| {
            report_undone(&c);
            Ok(0)
        }),
        Action::Fund(request) => ask(&mut client, request, |c: Changed| {
            for t in &c.tickets {
                println!("t{t}");
            }
            report_undone(&c);
            Ok(0)
        }),
        Action::Attach(request) => ask(&mut client, request, |c: Changed| {
            let tickets: Vec<String> = c.tickets.iter().map(|t| format!("t{t}")).collect();
            println!(
                "{} funded by {}",
                c.currency.as_deref().unwrap_or("?"),
                if tickets.is_empty() {
                    "nothing".to_string()
                } else {
                    tickets.join(" ")
                }
            );
            Ok(0)
        }),
        Action::Offer(request) => ask(&mut client, request, |r: OfferResult| {
            Ok(match r {
                OfferResult::Exchanged {
                    offer,
                    matched,
                    exchange,
                } => {
                    println!("exchanged: offer o{offer} met o{matched}; exchange x{exchange} is in force");
                    0
                }
                OfferResult::Queued { offer, conflicts } => {
                    println!("queued as o{offer}");
                    for o in &conflicts {
                        println!("  conflicting: {}", offer_line(o));
                    }
                    0
                }
                OfferResult::Refused {
                    offer,
                    matched,
                    why,
                } => {
                    eprintln!(
                        "tact: offer o{offer} met o{matched}, but the exchange was refused (both \
                         are withdrawn): {why}"
                    );
                    REFUSED
                }
            })
        }),
        Action::Accept { pid, offer } => accept(&mut client, pid, offer),
        Action::Show { currency, json } => {
            ask(&mut client, TicketsRequest::Show { currency }, |s: Show| {
                print_reply(&s, json, show_text)
            })
        }
        Action::Offers { json } => ask(&mut client, TicketsRequest::Offers, |o: Offers| {
            print_reply(&o, json, offers_text)
        }),
        Action::Explain { pid, json } => ask(
            &mut client,
            TicketsRequest::Explain { pid },
            |e: Explain| print_reply(&e, json, explain_text),
        ),
    };
    result
}

/// Accepts queued offer `offer` for `pid` by offering its mirror. The dealer matches the oldest
/// complementary offer, which is `offer` unless an older one is the same trade (then that one,
/// which is as good). Should it meet none (withdrawn meanwhile), the mirror is withdrawn too,
/// so that accepting never leaves an offer of `pid`'s behind.
fn accept(client: &mut Client, pid: i32, offer: u64) -> Result<i32> {
    let mut queued = None;
    let status = ask(client, TicketsRequest::Offers, |o: Offers| {
        queued = o.offers.into_iter().find(|q| q.id == offer);
        Ok(0)
    })?;
    if status != 0 {
        return Ok(status);
    }
    let Some(queued) = queued else {
        eprintln!("tact: no queued offer o{offer} (`tact tickets offers` lists them)");
        return Ok(REFUSED);
    };
    let mirror = TicketsRequest::Offer {
        pid,
        give: queued.want,
        want: queued.give,
        expires_ms: None,
    };
    let mut unmatched = None;
    let status = ask(client, mirror, |r: OfferResult| match r {
        OfferResult::Exchanged {
            matched, exchange, ..
        } => {
            println!(
                "accepted o{matched}: {pid} gives {} for {}; exchange x{exchange} is in force",
                trade_text(&queued.want),
                trade_text(&queued.give)
            );
            Ok(0)
        }
        OfferResult::Queued { offer: mine, .. } => {
            eprintln!("tact: o{offer} was withdrawn before it could be accepted");
            unmatched = Some(mine);
            Ok(REFUSED)
        }
        OfferResult::Refused { why, .. } => {
            eprintln!("tact: accepting o{offer} was refused (both offers are withdrawn): {why}");
            Ok(REFUSED)
        }
    })?;
    if let Some(mine) = unmatched {
        let withdraw = TicketsRequest::Cancel {
            offer: Some(mine),
            exchange: None,
        };
        ask(client, withdraw, |_: Changed| Ok(REFUSED))?;
    }
    Ok(status)
}

/// Sends `request`; prints a refusal and returns its exit status, or hands the reply to `then`.
fn ask<T: DeserializeOwned>(
    client: &mut Client,
    request: TicketsRequest,
    then: impl FnOnce(T) -> Result<i32>,
) -> Result<i32> {
    match client.tickets(request) {
        Ok(reply) => then(reply),
        Err(ClientError::Refused { code, message }) => {
            eprintln!("tact: {message}");
            Ok(match code {
                ErrorCode::Malformed
                | ErrorCode::TooLong
                | ErrorCode::Version
                | ErrorCode::UnknownOp
                | ErrorCode::Invalid
                | ErrorCode::Other => MALFORMED,
                ErrorCode::Permission
                | ErrorCode::NoSuchJob
                | ErrorCode::Busy
                | ErrorCode::Refused => REFUSED,
            })
        }
        Err(e) => Err(e.into()),
    }
}

fn print_reply<T: Serialize>(reply: &T, json: bool, text: impl Fn(&T) -> String) -> Result<i32> {
    if json {
        println!("{}", serde_json::to_string_pretty(reply)?);
    } else {
        print!("{}", text(reply));
    }
    Ok(0)
}

fn report_undone(c: &Changed) {
    for x in &c.undone {
        eprintln!("tact: exchange x{x} was undone");
    }
}

fn pid(s: &str) -> Result<i32, String> {
    s.parse::<i32>().ok().filter(|p| *p > 0).ok_or_else(|| {
        format!(
            "explain: {s:?} is not a pid; to explain a setup file's job, give the file and \
                 the job's name"
        )
    })
}

/// `t12` or `12`.
fn id(s: &str, prefix: char, what: &str) -> Result<u64, String> {
    s.strip_prefix(prefix)
        .unwrap_or(s)
        .parse()
        .map_err(|_| format!("{s:?} is not a {what} (write it as {prefix}12 or 12)"))
}

fn cancel(s: &str) -> Result<Action, String> {
    let (offer, exchange) = match s.chars().next() {
        Some('o') => (Some(id(s, 'o', "offer")?), None),
        Some('x') => (None, Some(id(s, 'x', "exchange")?)),
        _ => {
            return Err(format!(
                "cancel: {s:?} is neither an offer (o3) nor an exchange (x2)"
            ))
        }
    };
    Ok(Action::Change(TicketsRequest::Cancel { offer, exchange }))
}

/// The amounts given with `--cpu`, `--disk`, `--mem`.
fn amounts(
    cpu: Option<i64>,
    disk: Option<i64>,
    mem: &Option<String>,
    page_size: u64,
) -> Result<BTreeMap<Resource, i64>, String> {
    let mut out = BTreeMap::new();
    if let Some(n) = cpu {
        out.insert(Resource::Cpu, n);
    }
    if let Some(n) = disk {
        out.insert(Resource::Disk, n);
    }
    if let Some(size) = mem {
        out.insert(
            Resource::Mem,
            parse_size(size, page_size).map_err(|e| format!("--mem: {e}"))?,
        );
    }
    Ok(out)
}

/// `cpu:100`, `mem:64MiB`.
fn trade(s: &str, flag: &str, page_size: u64) -> Result<Amount, String> {
    let (resource, amount) = s
        .split_once(':')
        .ok_or_else(|| format!("{flag} {s:?}: write RESOURCE:AMOUNT, like cpu:100 or mem:64MiB"))?;
    let resource: Resource = resource.parse().map_err(|e| format!("{flag}: {e}"))?;
    let amount = parse_size(amount, page_size).map_err(|e| format!("{flag}: {e}"))?;
    Ok(Amount { resource, amount })
}

fn trade_text(a: &Amount) -> String {
    format!("{} {}", a.resource, a.amount)
}

fn offer_line(o: &OfferView) -> String {
    let expiry = o
        .expires_in_ms
        .map(|ms| format!(" (expires in {:.1}s)", ms as f64 / 1000.0))
        .unwrap_or_default();
    format!(
        "o{} {} gives {} for {}{expiry}",
        o.id,
        o.client,
        trade_text(&o.give),
        trade_text(&o.want)
    )
}

fn per_resource<T>(m: &BTreeMap<Resource, T>, f: impl Fn(&T) -> String) -> String {
    Resource::ALL
        .iter()
        .filter_map(|r| m.get(r).map(|v| format!("{r} {}", f(v))))
        .collect::<Vec<_>>()
        .join(", ")
}

fn show_text(s: &Show) -> String {
    let mut rows = vec![[
        "currency".to_string(),
        "kind".into(),
        "owner/group".into(),
        "mode".into(),
        "V (value)".into(),
        "A (active issued)".into(),
        "held".into(),
        "issued".into(),
    ]];
    let ticket_list = |ts: &[tact_proto::tickets::TicketView],
                       other: fn(&tact_proto::tickets::TicketView) -> &str| {
        ts.iter()
            .map(|t| {
                format!(
                    "t{} {}{} {} {}",
                    t.id,
                    t.amount,
                    if t.hard { "h" } else { "" },
                    t.resource,
                    other(t)
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for c in &s.currencies {
        let nonzero = |m: &BTreeMap<Resource, f64>| -> BTreeMap<Resource, f64> {
            m.iter()
                .filter(|(_, v)| **v != 0.0)
                .map(|(r, v)| (*r, *v))
                .collect()
        };
        let active: BTreeMap<Resource, i64> = c
            .active
            .iter()
            .filter(|(_, v)| **v != 0)
            .map(|(r, v)| (*r, *v))
            .collect();
        rows.push([
            c.name.clone(),
            c.kind.clone(),
            format!("{}/{}", c.owner, c.group),
            c.mode.clone(),
            per_resource(&nonzero(&c.value), |v| format!("{v:.1}")),
            per_resource(&active, |v| v.to_string()),
            ticket_list(&c.held, |t| &t.issuer).replace("; ", ", "),
            ticket_list(&c.issued, |t| &t.holder).replace("; ", ", "),
        ]);
    }
    let mut out = table(&rows);
    out.push_str(&enforcement_line(s.enforced, &s.enforcement));
    if s.clients.is_empty() {
        out.push_str("no attached processes\n");
        return out;
    }
    let mut rows = vec![[
        "pid".to_string(),
        "uid".into(),
        "resource".into(),
        "competing".into(),
        "R".into(),
        "R*".into(),
        "share".into(),
        "guaranteed".into(),
        "knob".into(),
    ]];
    for c in &s.clients {
        for (r, rights) in &c.rights {
            if rights.guaranteed == 0.0 && !rights.competing {
                continue;
            }
            rows.push(rights_row(
                c.pid.to_string(),
                c.uid.to_string(),
                *r,
                rights,
                c.knobs.get(r),
            ));
        }
    }
    out.push('\n');
    out.push_str(&table(&rows));
    out.push_str(
        "R is the rights now, R* with every client competing; share is R over the competing \
         clients' R, guaranteed R* over every client's R*; knob is what the daemon wrote.\n",
    );
    out
}

fn rights_row(
    pid: String,
    uid: String,
    r: Resource,
    rights: &Rights,
    knob: Option<&Knob>,
) -> [String; 9] {
    [
        pid,
        uid,
        r.to_string(),
        if rights.competing { "yes" } else { "no" }.into(),
        format!("{:.3}", rights.rights),
        format!("{:.3}", rights.guaranteed),
        format!("{:.2}%", 100.0 * rights.share),
        format!("{:.2}%", 100.0 * rights.guaranteed_share),
        knob.map_or_else(|| "-".into(), knob_text),
    ]
}

/// `cpu.shares = 87381`, the file by name (its directory is in `--json`).
fn knob_text(k: &Knob) -> String {
    let file = k.file.rsplit('/').next().unwrap_or(&k.file);
    format!("{file} = {}", k.value)
}

/// Whether the daemon applies the rights: users must be able to tell a served model from an
/// enforced one.
fn enforcement_line(enforced: bool, how: &str) -> String {
    if enforced {
        format!("enforced: {how}\n")
    } else if how.is_empty() {
        "not enforced\n".into()
    } else {
        format!("{how}\n")
    }
}

fn offers_text(o: &Offers) -> String {
    let mut out = String::new();
    if o.offers.is_empty() {
        out.push_str("no queued offers\n");
    }
    for offer in &o.offers {
        out.push_str(&format!("{}\n", offer_line(offer)));
    }
    if o.exchanges.is_empty() {
        out.push_str("no exchanges in force\n");
    }
    for x in &o.exchanges {
        let tickets: Vec<String> = x.tickets.iter().map(|t| format!("t{t}")).collect();
        out.push_str(&format!(
            "x{} {} gave {} to {} for {} (base tickets {})\n",
            x.id,
            x.a,
            trade_text(&x.give),
            x.b,
            trade_text(&x.get),
            tickets.join(" ")
        ));
    }
    out
}

fn explain_text(e: &Explain) -> String {
    let mut out = String::new();
    if e.resources.is_empty() {
        out.push_str(&format!(
            "process {} ({}): no tickets fund it\n",
            e.pid, e.currency
        ));
    }
    out.push_str(&enforcement_line(e.enforced, &e.enforcement));
    for r in &e.resources {
        let x = &r.rights;
        out.push_str(&format!(
            "process {} ({}) {}: R = {:.3} now ({}, share {:.2}%), R* = {:.3} with every client \
             competing (guaranteed share {:.2}%)\n",
            e.pid,
            e.currency,
            r.resource,
            x.rights,
            if x.competing {
                "competing"
            } else {
                "not competing"
            },
            100.0 * x.share,
            x.guaranteed,
            100.0 * x.guaranteed_share,
        ));
        if let Some(k) = &r.knob {
            out.push_str(&format!("  enforced as {} = {}\n", k.file, k.value));
        }
        if let Some(m) = &r.measured {
            out.push_str(&format!(
                "  measured: {:.1}% of what the clients used of {} over the last {:.1} s\n",
                100.0 * m.share,
                r.resource,
                m.seconds
            ));
        }
        for (i, p) in r.paths.iter().enumerate() {
            out.push_str(&format!(
                "  path {}: {}  = {:.3}\n",
                i + 1,
                p.summary,
                p.contribution
            ));
            let mut rows = vec![HOP_HEADER.map(String::from)];
            for h in &p.hops {
                let mut amount = h.amount.to_string();
                if h.hard {
                    amount.push_str(" hard");
                }
                if let Some(x) = h.exchange {
                    amount.push_str(&format!(" (exchange x{x})"));
                }
                rows.push([
                    h.ticket.map_or("self".into(), |t| format!("t{t}")),
                    format!("{} -> {}", h.issuer, h.holder),
                    amount,
                    if h.issuer == "base" {
                        "-".into()
                    } else {
                        h.issuer_active.to_string()
                    },
                    format!("{:.3}", h.issuer_value),
                    format!("{:.6}", h.factor),
                ]);
            }
            for line in table(&rows).lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out.push_str(
        "A path's part of R is the product of its factors: a base ticket's amount, then \
         amount/A(issuer) per hop (0 while inactive).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_trades_parse() {
        assert_eq!(id("t12", 't', "ticket"), Ok(12));
        assert_eq!(id("12", 't', "ticket"), Ok(12));
        assert!(id("x12", 't', "ticket").is_err());
        assert!(matches!(
            cancel("x2"),
            Ok(Action::Change(TicketsRequest::Cancel {
                offer: None,
                exchange: Some(2)
            }))
        ));
        assert!(cancel("t2").is_err());
        assert_eq!(
            trade("mem:2pages", "--give", 4096),
            Ok(Amount {
                resource: Resource::Mem,
                amount: 8192
            })
        );
        assert!(trade("cpu", "--give", 4096)
            .unwrap_err()
            .contains("RESOURCE:AMOUNT"));
        assert!(pid("setup.toml").is_err());
    }
}

//! The tickets model over the socket (spec tickets.md §6 "Live reconfiguration"): requests to
//! create, fund and inspect currencies, attach processes as clients, and trade rights through the
//! dealer, and their replies. Every operation is an `op` of its own (`tickets_fund`, ...) carried
//! by [`crate::Request::Tickets`]; `docs/protocol.md` is the reference.
//!
//! Currencies are named as the daemon's `TicketSystem` names them: `base`, `user:UID`, `pid:PID`,
//! or the name given at creation. Tickets, offers and exchanges are numbers (`t12` is ticket 12
//! on a terminal).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tact_core::tickets::{Mode, Resource};

use crate::error::ProtoError;
use crate::parse::{kind_of, Fields};
use crate::MAX_PID;

/// Largest ticket amount: 10^15, a petabyte of memory in bytes, far above any CPU or disk amount,
/// and small enough that products of amounts stay exact in the valuation's `f64`.
pub const MAX_AMOUNT: i64 = 1_000_000_000_000_000;

/// Longest currency name, in bytes.
pub const MAX_CURRENCY_NAME: usize = 128;

/// Longest offer lifetime: 30 days, in ms.
pub const MAX_EXPIRES_MS: u64 = 30 * 86_400_000;

/// One request of the tickets model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op")]
pub enum TicketsRequest {
    /// A pure currency; owner and group default to the peer's uid and primary gid, the mode to
    /// `fci/---/---`.
    #[serde(rename = "tickets_create")]
    Create {
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        owner: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        group: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        mode: Option<Mode>,
    },
    #[serde(rename = "tickets_destroy")]
    Destroy { currency: String },
    /// `amount` of `issuer`'s tickets for `resource` to `holder`; the reply names the ticket.
    #[serde(rename = "tickets_fund")]
    Fund {
        holder: String,
        issuer: String,
        resource: Resource,
        amount: i64,
        hard: bool,
    },
    #[serde(rename = "tickets_unfund")]
    Unfund { ticket: u64 },
    /// Resizes a ticket.
    #[serde(rename = "tickets_set")]
    Set { ticket: u64, amount: i64 },
    /// Every currency (or the one named) and every client.
    #[serde(rename = "tickets_show")]
    Show {
        #[serde(skip_serializing_if = "Option::is_none")]
        currency: Option<String>,
    },
    /// Registers a process as a client: funded by the default policy, or, with `from`, only by
    /// `amounts` of that currency's tickets.
    #[serde(rename = "tickets_attach")]
    Attach {
        pid: i32,
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        amounts: BTreeMap<Resource, i64>,
    },
    #[serde(rename = "tickets_detach")]
    Detach { pid: i32 },
    /// Offers `give` of the process's rights for `want` at the dealer.
    #[serde(rename = "tickets_offer")]
    Offer {
        pid: i32,
        give: Amount,
        want: Amount,
        #[serde(skip_serializing_if = "Option::is_none")]
        expires_ms: Option<u64>,
    },
    /// The queued offers and the exchanges in force.
    #[serde(rename = "tickets_offers")]
    Offers,
    /// Withdraws a queued offer, or undoes an exchange in force: exactly one of the two.
    #[serde(rename = "tickets_cancel")]
    Cancel {
        #[serde(skip_serializing_if = "Option::is_none")]
        offer: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exchange: Option<u64>,
    },
    /// A client's funding paths, rights and shares.
    #[serde(rename = "tickets_explain")]
    Explain { pid: i32 },
}

impl TicketsRequest {
    /// Whether the request may change the model (and the daemon then saves it).
    pub fn changes(&self) -> bool {
        !matches!(
            self,
            TicketsRequest::Show { .. } | TicketsRequest::Offers | TicketsRequest::Explain { .. }
        )
    }

    /// The operation's name on the wire.
    pub fn op(&self) -> &'static str {
        match self {
            TicketsRequest::Create { .. } => "tickets_create",
            TicketsRequest::Destroy { .. } => "tickets_destroy",
            TicketsRequest::Fund { .. } => "tickets_fund",
            TicketsRequest::Unfund { .. } => "tickets_unfund",
            TicketsRequest::Set { .. } => "tickets_set",
            TicketsRequest::Show { .. } => "tickets_show",
            TicketsRequest::Attach { .. } => "tickets_attach",
            TicketsRequest::Detach { .. } => "tickets_detach",
            TicketsRequest::Offer { .. } => "tickets_offer",
            TicketsRequest::Offers => "tickets_offers",
            TicketsRequest::Cancel { .. } => "tickets_cancel",
            TicketsRequest::Explain { .. } => "tickets_explain",
        }
    }
}

/// An amount of one resource's rights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amount {
    pub resource: Resource,
    pub amount: i64,
}

/// Decodes the fields of tickets operation `op`; `None` if `op` is not one.
pub(crate) fn parse(
    op: &str,
    obj: &Map<String, Value>,
) -> Option<Result<TicketsRequest, ProtoError>> {
    let f = Fields::new(obj, "");
    let request = match op {
        "tickets_create" => (|| {
            Ok(TicketsRequest::Create {
                name: currency(&f, "name")?,
                owner: opt_id(&f, "owner")?,
                group: opt_id(&f, "group")?,
                mode: match f.opt_string("mode", 16)? {
                    Some(m) => Some(m.parse().map_err(|e| ProtoError::field("mode", e))?),
                    None => None,
                },
            })
        })(),
        "tickets_destroy" => {
            currency(&f, "currency").map(|currency| TicketsRequest::Destroy { currency })
        }
        "tickets_fund" => (|| {
            Ok(TicketsRequest::Fund {
                holder: currency(&f, "holder")?,
                issuer: currency(&f, "issuer")?,
                resource: resource(&f, "resource")?,
                amount: amount(&f, "amount")?,
                hard: opt_bool(&f, "hard")?.unwrap_or(false),
            })
        })(),
        "tickets_unfund" => number(&f, "ticket").map(|ticket| TicketsRequest::Unfund { ticket }),
        "tickets_set" => (|| {
            Ok(TicketsRequest::Set {
                ticket: number(&f, "ticket")?,
                amount: amount(&f, "amount")?,
            })
        })(),
        "tickets_show" => (|| {
            Ok(TicketsRequest::Show {
                currency: f.opt_string("currency", MAX_CURRENCY_NAME)?,
            })
        })(),
        "tickets_attach" => (|| {
            let amounts = amounts(&f, "amounts")?;
            let from = f.opt_string("from", MAX_CURRENCY_NAME)?;
            if from.is_none() && !amounts.is_empty() {
                return Err(ProtoError::field(
                    "amounts",
                    "needs `from`, the currency that issues them",
                ));
            }
            if from.is_some() && amounts.is_empty() {
                return Err(ProtoError::field(
                    "amounts",
                    "missing: `from` funds the process only with the amounts given",
                ));
            }
            Ok(TicketsRequest::Attach {
                pid: pid(&f)?,
                from,
                amounts,
            })
        })(),
        "tickets_detach" => pid(&f).map(|pid| TicketsRequest::Detach { pid }),
        "tickets_offer" => (|| {
            Ok(TicketsRequest::Offer {
                pid: pid(&f)?,
                give: trade_amount(&f, "give")?,
                want: trade_amount(&f, "want")?,
                expires_ms: f
                    .opt_int("expires_ms", 1, MAX_EXPIRES_MS as i64)?
                    .map(|ms| ms as u64),
            })
        })(),
        "tickets_offers" => Ok(TicketsRequest::Offers),
        "tickets_cancel" => (|| {
            let offer = f.opt_int("offer", 0, i64::MAX)?.map(|n| n as u64);
            let exchange = f.opt_int("exchange", 0, i64::MAX)?.map(|n| n as u64);
            if offer.is_some() == exchange.is_some() {
                return Err(ProtoError::field(
                    "offer",
                    "give exactly one of `offer` (a queued offer) and `exchange` (one in force)",
                ));
            }
            Ok(TicketsRequest::Cancel { offer, exchange })
        })(),
        "tickets_explain" => pid(&f).map(|pid| TicketsRequest::Explain { pid }),
        _ => return None,
    };
    Some(request)
}

fn currency(f: &Fields, name: &str) -> Result<String, ProtoError> {
    f.string(name, MAX_CURRENCY_NAME)
}

fn opt_id(f: &Fields, name: &str) -> Result<Option<u32>, ProtoError> {
    Ok(f.opt_int(name, 0, u32::MAX.into())?.map(|n| n as u32))
}

fn number(f: &Fields, name: &str) -> Result<u64, ProtoError> {
    Ok(f.int(name, 0, i64::MAX)? as u64)
}

fn pid(f: &Fields) -> Result<i32, ProtoError> {
    Ok(f.int("pid", 1, MAX_PID.into())? as i32)
}

fn opt_bool(f: &Fields, name: &str) -> Result<Option<bool>, ProtoError> {
    match f.get(name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(f.err(
            name,
            format!("must be true or false, not {}", kind_of(other)),
        )),
    }
}

fn opt_object<'a>(
    f: &Fields<'a>,
    name: &str,
) -> Result<Option<&'a Map<String, Value>>, ProtoError> {
    match f.get(name) {
        None => Ok(None),
        Some(Value::Object(obj)) => Ok(Some(obj)),
        Some(other) => Err(f.err(name, format!("must be an object, not {}", kind_of(other)))),
    }
}

/// A ticket amount: positive, since only the dealer issues negative tickets (spec §2.1).
fn amount(f: &Fields, name: &str) -> Result<i64, ProtoError> {
    f.int(name, 1, MAX_AMOUNT)
}

fn resource(f: &Fields, name: &str) -> Result<Resource, ProtoError> {
    f.string(name, 16)?
        .parse()
        .map_err(|e: String| f.err(name, e))
}

/// `{"cpu": 100, "disk": 50}`.
fn amounts(f: &Fields, name: &str) -> Result<BTreeMap<Resource, i64>, ProtoError> {
    let Some(obj) = opt_object(f, name)? else {
        return Ok(BTreeMap::new());
    };
    let path = f.path(name);
    let inner = Fields::new(obj, &path);
    let mut out = BTreeMap::new();
    for key in obj.keys() {
        let r: Resource = key.parse().map_err(|e: String| inner.err(key, e))?;
        out.insert(r, amount(&inner, key)?);
    }
    Ok(out)
}

/// `{"resource": "cpu", "amount": 10}`.
fn trade_amount(f: &Fields, name: &str) -> Result<Amount, ProtoError> {
    let obj = opt_object(f, name)?.ok_or_else(|| f.err(name, "missing"))?;
    let path = f.path(name);
    let inner = Fields::new(obj, &path);
    Ok(Amount {
        resource: resource(&inner, "resource")?,
        amount: amount(&inner, "amount")?,
    })
}

/// The reply to the operations that change the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Changed {
    /// `tickets_fund`: the new ticket. `tickets_attach`: the tickets funding the process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tickets: Vec<u64>,
    /// `tickets_create` and `tickets_attach`: the currency's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Exchanges the operation undid (a participant left, or would have negative rights).
    #[serde(default)]
    pub undone: Vec<u64>,
}

/// The reply to `tickets_show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Show {
    pub currencies: Vec<CurrencyView>,
    /// The attached processes, by pid.
    pub clients: Vec<ClientView>,
    /// Whether the daemon applies the rights to the machine (cgroup knobs per client); absent
    /// from the replies of daemons that never did.
    #[serde(default)]
    pub enforced: bool,
    /// Where it applies them, or why it does not.
    #[serde(default)]
    pub enforcement: String,
}

/// A currency with its value and tickets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrencyView {
    pub id: u32,
    pub name: String,
    /// `base`, `pure`, `client` or `soft_tix` (the hidden issuer of a currency's soft tickets
    /// once it has issued a hard one).
    pub kind: String,
    pub owner: u32,
    pub group: u32,
    pub mode: String,
    /// `V(C,r)`.
    pub value: BTreeMap<Resource, f64>,
    /// `A(C,r)`: the amount of its issued tickets that are active.
    pub active: BTreeMap<Resource, i64>,
    pub issued: Vec<TicketView>,
    pub held: Vec<TicketView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TicketView {
    pub id: u64,
    pub issuer: String,
    pub holder: String,
    pub resource: Resource,
    pub amount: i64,
    pub hard: bool,
    /// The exchange it belongs to, for the dealer's tickets.
    #[serde(default)]
    pub exchange: Option<u64>,
    pub active: bool,
    pub value: f64,
}

/// An attached process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientView {
    pub pid: u32,
    pub uid: u32,
    pub currency: String,
    pub rights: BTreeMap<Resource, Rights>,
    /// What the daemon wrote for it, per resource it applies (empty when not enforced).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<Resource, Knob>,
}

/// A knob the daemon wrote for a client: what the machine enforces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knob {
    /// The file in the client's cgroup: `cpu.shares`, `cpu.weight`, `blkio.bfq.weight`,
    /// `io.weight`, `io.bfq.weight`, `memory.min`, `memory.low`, `memory.soft_limit_in_bytes`.
    pub file: String,
    /// The weight, or the bytes of memory protection.
    pub value: u64,
}

/// A client's rights to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rights {
    /// Whether it competes now (runnable for cpu, waiting on I/O for disk, holding memory
    /// tickets for mem).
    pub competing: bool,
    /// `R`: rights now.
    pub rights: f64,
    /// `R*`: rights with every client competing.
    pub guaranteed: f64,
    /// `R / ΣR` over the competing clients (0 when it does not compete).
    pub share: f64,
    /// `R* / ΣR*` over every client.
    pub guaranteed_share: f64,
}

/// The reply to `tickets_explain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explain {
    pub pid: u32,
    pub currency: String,
    /// The resources it is funded in.
    pub resources: Vec<ResourceExplanation>,
    /// As in [`Show`].
    #[serde(default)]
    pub enforced: bool,
    #[serde(default)]
    pub enforcement: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceExplanation {
    pub resource: Resource,
    #[serde(flatten)]
    pub rights: Rights,
    /// Their contributions sum to `rights`.
    pub paths: Vec<PathView>,
    /// What the daemon wrote for this resource, when it enforces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knob: Option<Knob>,
    /// What it actually got lately (cpu and disk; absent until the daemon has two looks at
    /// the clients, or when none used any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
}

/// A client's part of what every client of the daemon used of a resource (CPU time, I/O
/// bytes) over the last `seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub share: f64,
    pub seconds: f64,
}

/// One funding path from the base.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathView {
    /// The product of its hops' factors.
    pub contribution: f64,
    /// `base -1000-> A -100/300-> A1`.
    pub summary: String,
    pub hops: Vec<HopView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopView {
    /// `None` for the client's implicit self ticket, the last hop.
    pub ticket: Option<u64>,
    pub issuer: String,
    pub holder: String,
    pub amount: i64,
    pub hard: bool,
    #[serde(default)]
    pub exchange: Option<u64>,
    pub active: bool,
    /// `A(issuer)`.
    pub issuer_active: i64,
    /// `V(issuer)`.
    pub issuer_value: f64,
    /// A base ticket's amount, else `amount / A(issuer)` (0 when inactive).
    pub factor: f64,
}

/// The reply to `tickets_offer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum OfferResult {
    /// It matched queued offer `matched`; exchange `exchange` is in force.
    Exchanged {
        offer: u64,
        matched: u64,
        exchange: u64,
    },
    /// It waits as `offer`; `conflicts` trade the same resources the other way at other amounts.
    Queued {
        offer: u64,
        conflicts: Vec<OfferView>,
    },
    /// It matched queued offer `matched`, but the model refused the exchange; both are withdrawn.
    Refused {
        offer: u64,
        matched: u64,
        why: String,
    },
}

/// The reply to `tickets_offers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offers {
    /// Oldest first.
    pub offers: Vec<OfferView>,
    pub exchanges: Vec<ExchangeView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferView {
    pub id: u64,
    /// The client's currency (`pid:PID`).
    pub client: String,
    pub give: Amount,
    pub want: Amount,
    /// Time left before it lapses; `None`: it waits until cancelled or its client exits.
    #[serde(default)]
    pub expires_in_ms: Option<u64>,
}

/// An exchange in force: `a` gave `give` to `b` for `get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExchangeView {
    pub id: u64,
    pub a: String,
    pub give: Amount,
    pub b: String,
    pub get: Amount,
    pub tickets: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use crate::{parse_request, Request};

    use super::*;

    fn ok(line: &str) -> TicketsRequest {
        match parse_request(line.as_bytes()) {
            Ok(Request::Tickets(t)) => t,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn err(line: &str) -> String {
        parse_request(line.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn requests_round_trip_through_their_lines() {
        let requests = [
            TicketsRequest::Create {
                name: "A".into(),
                owner: Some(1000),
                group: None,
                mode: Some("fci/f--/---".parse().unwrap()),
            },
            TicketsRequest::Destroy {
                currency: "A".into(),
            },
            TicketsRequest::Fund {
                holder: "A".into(),
                issuer: "base".into(),
                resource: Resource::Mem,
                amount: 1 << 30,
                hard: true,
            },
            TicketsRequest::Unfund { ticket: 0 },
            TicketsRequest::Set {
                ticket: 3,
                amount: 7,
            },
            TicketsRequest::Show { currency: None },
            TicketsRequest::Attach {
                pid: 42,
                from: Some("A".into()),
                amounts: BTreeMap::from([(Resource::Cpu, 100), (Resource::Disk, 5)]),
            },
            TicketsRequest::Attach {
                pid: 42,
                from: None,
                amounts: BTreeMap::new(),
            },
            TicketsRequest::Detach { pid: 42 },
            TicketsRequest::Offer {
                pid: 42,
                give: Amount {
                    resource: Resource::Cpu,
                    amount: 10,
                },
                want: Amount {
                    resource: Resource::Disk,
                    amount: 20,
                },
                expires_ms: Some(1000),
            },
            TicketsRequest::Offers,
            TicketsRequest::Cancel {
                offer: None,
                exchange: Some(2),
            },
            TicketsRequest::Explain { pid: 42 },
        ];
        for r in requests {
            let line = Request::Tickets(r.clone()).to_line();
            let text = std::str::from_utf8(&line).unwrap();
            assert!(text.contains(&format!("\"op\":\"{}\"", r.op())), "{text}");
            assert_eq!(ok(text.trim_end()), r);
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let e = err(
            r#"{"v":1,"op":"tickets_fund","holder":"A","issuer":"base","resource":"cpu","amount":-5}"#,
        );
        assert!(e.starts_with("amount: must be an integer from 1"), "{e}");
        let e = err(
            r#"{"v":1,"op":"tickets_fund","holder":"A","issuer":"base","resource":"gpu","amount":5}"#,
        );
        assert!(e.starts_with("resource: unknown resource"), "{e}");
        let e = err(r#"{"v":1,"op":"tickets_create","name":"A","mode":"rwx/---/---"}"#);
        assert!(e.starts_with("mode: "), "{e}");
        let e = err(r#"{"v":1,"op":"tickets_attach","pid":4,"amounts":{"cpu":1}}"#);
        assert!(e.starts_with("amounts: needs `from`"), "{e}");
        let e = err(r#"{"v":1,"op":"tickets_attach","pid":4,"from":"A","amounts":{"gpu":1}}"#);
        assert!(e.starts_with("amounts.gpu: unknown resource"), "{e}");
        let e = err(r#"{"v":1,"op":"tickets_attach","pid":4,"from":"A","amounts":{"cpu":0}}"#);
        assert!(
            e.starts_with("amounts.cpu: must be an integer from 1"),
            "{e}"
        );
        let e = err(
            r#"{"v":1,"op":"tickets_offer","pid":4,"give":{"resource":"cpu","amount":1},"want":{"resource":"disk"}}"#,
        );
        assert!(e.starts_with("want.amount: missing"), "{e}");
        let e = err(r#"{"v":1,"op":"tickets_cancel","offer":1,"exchange":2}"#);
        assert!(e.starts_with("offer: give exactly one"), "{e}");
        let e = err(r#"{"v":1,"op":"tickets_explain","pid":0}"#);
        assert!(e.starts_with("pid: "), "{e}");
        let e = err(r#"{"v":1,"op":"tickets_destroy"}"#);
        assert!(e.starts_with("currency: missing"), "{e}");
    }

    #[test]
    fn replies_decode() {
        let line = crate::ok_line(&OfferResult::Queued {
            offer: 3,
            conflicts: vec![],
        });
        let back: OfferResult = crate::parse_reply(&line).unwrap();
        assert_eq!(
            back,
            OfferResult::Queued {
                offer: 3,
                conflicts: vec![]
            }
        );
        let changed: Changed = crate::parse_reply(br#"{"v":1,"ok":true,"tickets":[4]}"#).unwrap();
        assert_eq!(changed.tickets, vec![4]);
    }

    #[test]
    fn replies_of_daemons_that_did_not_enforce_still_decode() {
        let show: Show = crate::parse_reply(
            br#"{"v":1,"ok":true,"currencies":[],"clients":[{"pid":7,"uid":0,"currency":"pid:7","rights":{}}]}"#,
        )
        .unwrap();
        assert!(!show.enforced && show.enforcement.is_empty());
        assert!(show.clients[0].knobs.is_empty());
        let explain: Explain = crate::parse_reply(
            br#"{"v":1,"ok":true,"pid":7,"currency":"pid:7","resources":[{"resource":"cpu","competing":true,"rights":1.0,"guaranteed":1.0,"share":1.0,"guaranteed_share":1.0,"paths":[]}]}"#,
        )
        .unwrap();
        assert!(!explain.enforced);
        assert_eq!(explain.resources[0].knob, None);
    }
}

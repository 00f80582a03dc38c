//! `tact tickets check` and `explain`: what a setup gives each job when every job competes, as a
//! table or JSON, and a job's funding paths factor by factor, exchange tickets included.

use serde_json::{json, Value};
use tact_core::tickets::{
    CurrencyId, Exchange, ExchangeId, Explanation, FundingPath, Hop, Kind, Model, Resource,
};

use super::setup::{JobSetup, Setup};

/// The columns of a funding path's hops, offline (`explain SETUP JOB`) and from the daemon.
pub(crate) const HOP_HEADER: [&str; 6] = [
    "ticket",
    "issuer -> holder",
    "amount",
    "A(issuer)",
    "V(issuer)",
    "factor",
];

/// The setup's model with every job competing for every resource: the state `R*` describes, and
/// the one `check` and `explain` show.
pub fn everyone_active(setup: &Setup) -> Model {
    let mut model = setup.model.clone();
    for job in &setup.jobs {
        for r in Resource::ALL {
            // Jobs are client currencies by construction.
            let _ = model.set_active(job.id, r, true);
        }
    }
    model
}

/// A job's explanation for each resource it is funded in.
fn explanations(model: &Model, job: &JobSetup) -> Vec<Explanation> {
    Resource::ALL
        .into_iter()
        .filter_map(|r| model.explain_path(job.id, r).ok())
        .filter(|e| !e.paths.is_empty())
        .collect()
}

/// `R*` of a job over the sum of every job's `R*`, for `r`.
fn guaranteed_share(setup: &Setup, model: &Model, job: &JobSetup, r: Resource) -> f64 {
    let total: f64 = setup
        .jobs
        .iter()
        .filter_map(|j| model.guaranteed(j.id, r).ok())
        .sum();
    let mine = model.guaranteed(job.id, r).unwrap_or(0.0);
    if total > 0.0 {
        mine / total
    } else {
        0.0
    }
}

fn name(model: &Model, c: CurrencyId) -> String {
    model
        .currency(c)
        .map_or_else(|_| c.to_string(), |c| c.name.clone())
}

/// The other party of exchange `x`, as seen by `holder`.
fn partner(model: &Model, x: ExchangeId, holder: CurrencyId) -> String {
    model.exchange(x).map_or_else(
        |_| "?".into(),
        |x| name(model, if x.a == holder { x.b } else { x.a }),
    )
}

/// `D gives 300 of disk to I for 300 of cpu`.
fn exchange_line(model: &Model, x: &Exchange) -> String {
    format!(
        "{} gives {} of {} to {} for {} of {}",
        name(model, x.a),
        x.give.1,
        x.give.0,
        name(model, x.b),
        x.get.1,
        x.get.0
    )
}

fn exchange_json(model: &Model, x: &Exchange) -> Value {
    json!({
        "id": x.id.to_string(),
        "a": name(model, x.a),
        "a_gives": { x.give.0.to_string(): x.give.1 },
        "b": name(model, x.b),
        "b_gives": { x.get.0.to_string(): x.get.1 },
    })
}

/// One funding path on a line: `base -1000-> A -100/300-> A1`, with `h` after hard amounts; an
/// exchange ticket as `exchange x1 with I: -300`. The job's own self ticket is left out (its
/// factor is 1 unless the job transfers).
pub fn path_line(model: &Model, path: &FundingPath) -> String {
    // An exchange ticket comes straight from the base to its holder: the path is that one hop.
    if let Some((x, hop)) = path.hops.iter().find_map(|h| Some((h.exchange?, h))) {
        return format!(
            "exchange {x} with {}: {:+}",
            partner(model, x, hop.holder),
            hop.amount
        );
    }
    let mut line = String::from("base");
    for hop in path.hops.iter().filter(|h| h.ticket.is_some()) {
        let hard = if hop.kind == Kind::Hard { "h" } else { "" };
        let amount = if hop.issuer == CurrencyId::BASE {
            format!("{}{hard}", hop.amount)
        } else {
            format!("{}{hard}/{}", hop.amount, hop.issuer_active)
        };
        line.push_str(&format!(" -{amount}-> {}", name(model, hop.holder)));
    }
    line
}

/// Every path of an explanation, joined with ` + ` (pooled funding).
pub fn paths_line(model: &Model, e: &Explanation) -> String {
    e.paths
        .iter()
        .map(|p| path_line(model, p))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// `tact tickets check`.
pub fn check(setup: &Setup, json: bool) -> String {
    let model = everyone_active(setup);
    if json {
        let jobs: Vec<Value> = setup
            .jobs
            .iter()
            .map(|job| {
                let resources: serde_json::Map<String, Value> = explanations(&model, job)
                    .iter()
                    .map(|e| {
                        let r = e.resource;
                        (
                            r.to_string(),
                            json!({
                                "guaranteed": e.guaranteed,
                                "share": guaranteed_share(setup, &model, job, r),
                                "paths": e.paths.iter().map(|p| path_line(&model, p)).collect::<Vec<_>>(),
                            }),
                        )
                    })
                    .collect();
                json!({ "name": job.name, "command": job.command, "resources": resources })
            })
            .collect();
        let base = setup.model.base_hard_total();
        let base: serde_json::Map<String, Value> = base
            .iter()
            .map(|(r, v)| (r.to_string(), json!(v)))
            .collect();
        let exchanges: Vec<Value> = model
            .exchanges()
            .map(|x| exchange_json(&model, x))
            .collect();
        return serde_json::to_string_pretty(
            &json!({ "base": base, "jobs": jobs, "exchanges": exchanges }),
        )
        .expect("plain JSON values");
    }
    let mut rows = vec![[
        "job".to_string(),
        "resource".into(),
        "R*".into(),
        "share".into(),
        "tickets".into(),
    ]];
    for job in &setup.jobs {
        for e in explanations(&model, job) {
            rows.push([
                job.name.clone(),
                e.resource.to_string(),
                format!("{:.1}", e.guaranteed),
                format!(
                    "{:.2}%",
                    100.0 * guaranteed_share(setup, &model, job, e.resource)
                ),
                paths_line(&model, &e),
            ]);
        }
    }
    let mut out = table(&rows);
    out.push_str(
        "R* is a job's rights with every job competing; share is R* over all jobs' R* for that \
         resource.\n",
    );
    for x in model.exchanges() {
        out.push_str(&format!(
            "exchange {}: {} (four base tickets; the other jobs keep their R and R*)\n",
            x.id,
            exchange_line(&model, x)
        ));
    }
    out
}

/// `tact tickets explain`.
pub fn explain(setup: &Setup, job: &JobSetup, json: bool) -> String {
    let model = everyone_active(setup);
    let all = explanations(&model, job);
    let mine: Vec<&Exchange> = model
        .exchanges()
        .filter(|x| x.a == job.id || x.b == job.id)
        .collect();
    if json {
        let resources: Vec<Value> = all
            .iter()
            .map(|e| {
                json!({
                    "resource": e.resource,
                    "rights": e.rights,
                    "guaranteed": e.guaranteed,
                    "share": guaranteed_share(setup, &model, job, e.resource),
                    "paths": e.paths.iter().map(|p| json!({
                        "contribution": p.contribution(),
                        "summary": path_line(&model, p),
                        "hops": p.hops.iter().map(|h| hop_json(&model, h)).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let exchanges: Vec<Value> = mine.iter().map(|x| exchange_json(&model, x)).collect();
        return serde_json::to_string_pretty(
            &json!({ "job": job.name, "resources": resources, "exchanges": exchanges }),
        )
        .expect("plain JSON values");
    }
    let mut out = String::new();
    if all.is_empty() {
        out.push_str(&format!("{}: no tickets fund it\n", job.name));
    }
    for x in &mine {
        out.push_str(&format!(
            "{}: in exchange {}: {}\n",
            job.name,
            x.id,
            exchange_line(&model, x)
        ));
    }
    for e in &all {
        out.push_str(&format!(
            "{} {}: R = {:.3} with every job competing ({:.2}% of {} over all jobs)\n",
            job.name,
            e.resource,
            e.rights,
            100.0 * guaranteed_share(setup, &model, job, e.resource),
            e.resource
        ));
        for (i, p) in e.paths.iter().enumerate() {
            out.push_str(&format!(
                "  path {}: {}  = {:.3}\n",
                i + 1,
                path_line(&model, p),
                p.contribution()
            ));
            let mut rows = vec![HOP_HEADER.map(String::from)];
            for h in &p.hops {
                rows.push([
                    h.ticket.map_or("self".into(), |t| t.to_string()),
                    format!("{} -> {}", name(&model, h.issuer), name(&model, h.holder)),
                    match h.exchange {
                        Some(x) => format!(
                            "{} (exchange {x} with {})",
                            h.amount,
                            partner(&model, x, h.holder)
                        ),
                        None if h.kind == Kind::Hard => format!("{} hard", h.amount),
                        None => h.amount.to_string(),
                    },
                    if h.issuer == CurrencyId::BASE {
                        "-".into()
                    } else {
                        h.issuer_active.to_string()
                    },
                    format!("{:.3}", h.issuer_value),
                    format!("{:.6}", h.factor()),
                ]);
            }
            for line in table(&rows).lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out.push_str(
        "A path's part of R is the product of its factors: a base ticket's amount, then \
         amount/A(issuer) per hop.\n",
    );
    out
}

fn hop_json(model: &Model, h: &Hop) -> Value {
    json!({
        "ticket": h.ticket.map(|t| t.to_string()),
        "issuer": name(model, h.issuer),
        "holder": name(model, h.holder),
        "amount": h.amount,
        "kind": h.kind,
        "exchange": h.exchange.map(|x| x.to_string()),
        "active": h.active,
        "issuer_active": h.issuer_active,
        "issuer_value": h.issuer_value,
        "factor": h.factor(),
    })
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
pub fn table<R: AsRef<[String]>>(rows: &[R]) -> String {
    let n = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let mut widths = vec![0usize; n];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row.as_ref()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let row = row.as_ref();
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::setup::{Machine, Setup};
    use super::*;

    fn e1() -> Setup {
        let text = r#"
[[currency]]
name = "A"
funding = [{ from = "base", cpu = 1000 }]
[[job]]
name = "A1"
command = "x"
funding = [{ from = "A", cpu = 100 }]
[[job]]
name = "A2"
command = "x"
funding = [{ from = "A", cpu = 200 }, { from = "base", cpu = 500, disk = 10 }]
"#;
        let machine = Machine {
            page_size: 4096,
            reservable_mem: 1 << 30,
        };
        Setup::parse(text, "s.toml", &machine).unwrap()
    }

    #[test]
    fn check_lists_each_funded_resource_with_its_paths() {
        let out = check(&e1(), false);
        assert!(out.contains("base -1000-> A -100/300-> A1"), "{out}");
        assert!(
            out.contains("base -1000-> A -200/300-> A2 + base -500-> A2"),
            "{out}"
        );
        // A1: 333.3 of 1500 cpu; A2 alone holds disk.
        assert!(out.contains("22.22%"), "{out}");
        assert!(out.contains("100.00%"), "{out}");
        let v: Value = serde_json::from_str(&check(&e1(), true)).unwrap();
        let a2 = &v["jobs"][1]["resources"];
        assert!((a2["cpu"]["guaranteed"].as_f64().unwrap() - (2000.0 / 3.0 + 500.0)).abs() < 1e-6);
        assert_eq!(a2["cpu"]["paths"].as_array().unwrap().len(), 2);
        assert!(v["jobs"][0]["resources"].get("disk").is_none());
    }

    #[test]
    fn explain_factors_multiply_out_to_the_rights() {
        let setup = e1();
        let job = setup.job("A2").unwrap();
        let v: Value = serde_json::from_str(&explain(&setup, job, true)).unwrap();
        for r in v["resources"].as_array().unwrap() {
            let sum: f64 = r["paths"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    p["hops"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| h["factor"].as_f64().unwrap())
                        .product::<f64>()
                })
                .sum();
            assert!((sum - r["rights"].as_f64().unwrap()).abs() < 1e-9, "{r}");
        }
        let text = explain(&setup, job, false);
        assert!(text.contains("A -> A2"), "{text}");
        assert!(text.contains("0.666667"), "{text}");
    }
}

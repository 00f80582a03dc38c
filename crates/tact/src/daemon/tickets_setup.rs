//! `tact daemon --tickets-setup FILE`: the initial tickets model, declared in the syntax of
//! `tact tickets run`'s setup files (read and checked by [`Setup`]): `[base]` hard totals and
//! `[[currency]]` tables with their funding. `[[job]]` tables are refused, since the daemon
//! starts no jobs (running processes are attached), and with them `[[exchange]]` ones, which
//! only jobs make.
//!
//! The setup's model is replayed into the daemon's [`TicketSystem`] (currencies in file order,
//! then every ticket in the order it was issued), so the daemon's policy, brokers and dealer
//! hold it as if it had been built with `tact tickets create` and `fund` as the daemon's owner.

use std::path::Path;

use tact_core::tickets::{Caller, CurrencyId, CurrencyKind, Model, TicketSystem};

use crate::tickets::setup::Setup;

/// The model `path` declares, or a one-line error naming the file, table and field.
pub fn load(path: &Path) -> Result<TicketSystem, String> {
    let machine = crate::tickets::this_machine().map_err(|e| format!("{e:#}"))?;
    let setup = Setup::load(path, &machine).map_err(|e| e.to_string())?;
    if let Some(job) = setup.jobs.first() {
        return Err(format!(
            "{}: [[job]] {:?}: the daemon starts no jobs (`tact tickets run {}` does): declare \
             only [base] and [[currency]] tables here, and attach running processes with \
             `tact tickets attach PID --from CURRENCY`",
            path.display(),
            job.name,
            path.display()
        ));
    }
    replay(&setup.model).map_err(|e| format!("{}: {e}", path.display()))
}

/// `model`'s pure currencies and their funding in a fresh system with the same base totals.
fn replay(model: &Model) -> Result<TicketSystem, String> {
    let mut system =
        super::tickets::fresh(Some(model.base_hard_total())).map_err(|e| format!("{e:#}"))?;
    let root = Caller::root();
    for c in model.currencies().filter(|c| c.kind == CurrencyKind::Pure) {
        system
            .create_currency(&root, &c.name, c.broker)
            .map_err(|e| format!("[[currency]] {:?}: {e}", c.name))?;
    }
    for t in model.tickets() {
        let holder = model.currency(t.holder).map_err(|e| e.to_string())?;
        // The hard ticket funding a soft_tix is the model's own bookkeeping.
        if holder.is_hidden() {
            continue;
        }
        let (Some(h), Some(i)) = (
            ours(&system, model, t.holder),
            ours(&system, model, t.issuer),
        ) else {
            return Err(format!(
                "[[currency]] {:?}: funding that the daemon's model cannot hold",
                holder.name
            ));
        };
        system
            .fund(&root, h, i, t.resource, t.amount, t.kind)
            .map_err(|e| {
                format!(
                    "[[currency]] {:?}, {} funding: {e}",
                    holder.name, t.resource
                )
            })?;
    }
    Ok(system)
}

/// The daemon's currency for the setup's currency `c`. A soft ticket that a currency issued
/// after its first hard one comes from its hidden soft_tix, which `fund` finds again by itself.
fn ours(system: &TicketSystem, model: &Model, c: CurrencyId) -> Option<CurrencyId> {
    let currency = model.currency(c).ok()?;
    match currency.kind {
        CurrencyKind::Base => Some(CurrencyId::BASE),
        CurrencyKind::SoftTix { of } => ours(system, model, of),
        _ => system.named(&currency.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tact_core::tickets::Resource;

    fn load_text(text: &str) -> Result<TicketSystem, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, text).unwrap();
        load(&path).map_err(|e| e.replace(&path.display().to_string(), "s.toml"))
    }

    #[test]
    fn currencies_and_their_funding_are_replayed() {
        let system = load_text(
            r#"
            [base]
            cpu = 2000
            [[currency]]
            name = "B"
            funding = [{ from = "A", cpu = 100 }, { from = "A", cpu = 300, hard = true }]
            [[currency]]
            name = "A"
            funding = [{ from = "base", cpu = 1000, disk = 500 }]
            "#,
        )
        .unwrap();
        let model = system.model();
        assert_eq!(model.base_hard_total()[Resource::Cpu], 2000);
        let a = system.named("A").unwrap();
        let b = system.named("B").unwrap();
        let backing = |c: CurrencyId| -> Vec<(i64, Resource, bool)> {
            model
                .currency(c)
                .unwrap()
                .backing
                .iter()
                .map(|t| model.ticket(*t).unwrap())
                .map(|t| {
                    (
                        t.amount,
                        t.resource,
                        t.kind == tact_core::tickets::Kind::Hard,
                    )
                })
                .collect()
        };
        assert_eq!(
            backing(a),
            [(1000, Resource::Cpu, false), (500, Resource::Disk, false)]
        );
        assert_eq!(
            backing(b),
            [(100, Resource::Cpu, false), (300, Resource::Cpu, true)]
        );
        // A's soft ticket to B moved to A's soft_tix when A issued its hard one.
        assert_eq!(model.hard_total(a, Resource::Cpu).unwrap(), Some(1000));
        system.validate().unwrap();
    }

    #[test]
    fn jobs_are_refused_naming_the_file_and_table() {
        let e = load_text(
            r#"
            [[job]]
            name = "J"
            command = "true"
            funding = [{ from = "base", cpu = 1 }]
            "#,
        )
        .err()
        .unwrap();
        assert!(
            e.starts_with("s.toml: [[job]] \"J\": the daemon starts no jobs"),
            "{e}"
        );
        let e = load_text("[[currency]]\nname = \"A\"\nfunding = [{ from = \"Z\", cpu = 1 }]\n")
            .err()
            .unwrap();
        assert!(e.contains("s.toml") && e.contains("funding[0].from"), "{e}");
    }
}

//! The setup file of `tact tickets` (docs/tickets.md): the base's hard totals, the memory arena,
//! currencies and jobs with their funding, and exchanges between jobs, in TOML, read into a
//! tickets [`Model`] together with the names of its currencies. Every error is one line naming
//! the file and the table and field at fault.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use tact_core::tickets::{
    Broker, CurrencyId, CurrencyKind, Kind, Mode, Model, PerResource, PrincipalId, Resource,
    TicketsError,
};
use tact_proto::tickets::MAX_AMOUNT;

/// The name of the root currency; no currency or job may take it.
const BASE: &str = "base";
/// `H(base,r)` for CPU and disk when `[base]` does not give it (spec §2.5: 1000 per resource).
const DEFAULT_TOTAL: i64 = 1000;

/// What the setup needs to know about the machine: memory amounts in pages, and `H(base,Mem)`.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    pub page_size: u64,
    /// Bytes tact may reserve (spec §4: MemTotal − unreclaimable kernel memory − free headroom).
    pub reservable_mem: i64,
}

/// A bad setup file: one line, naming the file, the table and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError(pub String);

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

/// A job of the setup, as a client currency of the model.
#[derive(Debug, Clone)]
pub struct JobSetup {
    pub name: String,
    /// Run through `sh -c`.
    pub command: String,
    pub id: CurrencyId,
}

/// A setup file read into a model.
#[derive(Debug, Clone)]
pub struct Setup {
    pub model: Model,
    /// In file order.
    pub jobs: Vec<JobSetup>,
    /// `[memory] arena`: the bytes the jobs share, written as the memory limit of their parent
    /// cgroup (with the v1 feedback loop that keeps floors inside it, docs/tickets.md).
    pub arena: Option<u64>,
}

impl Setup {
    /// Reads and checks `path`.
    pub fn load(path: &Path, machine: &Machine) -> Result<Setup, SetupError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SetupError(format!("{}: cannot read: {e}", path.display())))?;
        Setup::parse(&text, &path.display().to_string(), machine)
    }

    /// Checks `text`, the contents of the file called `file` in errors.
    pub fn parse(text: &str, file: &str, machine: &Machine) -> Result<Setup, SetupError> {
        let raw: File = toml::from_str(text).map_err(|e| syntax_error(file, text, &e))?;
        Builder {
            file,
            machine,
            names: BTreeMap::new(),
        }
        .build(raw)
    }

    /// The job called `name`.
    pub fn job(&self, name: &str) -> Option<&JobSetup> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    base: BaseTable,
    #[serde(default)]
    currency: Vec<CurrencyTable>,
    #[serde(default)]
    job: Vec<JobTable>,
    #[serde(default)]
    exchange: Vec<ExchangeTable>,
    #[serde(default)]
    memory: MemoryTable,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MemoryTable {
    /// Bytes, or a string with a unit.
    arena: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BaseTable {
    cpu: Option<i64>,
    disk: Option<i64>,
    mem: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CurrencyTable {
    name: String,
    funding: Vec<Funding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobTable {
    name: String,
    command: String,
    funding: Vec<Funding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Funding {
    from: String,
    cpu: Option<i64>,
    disk: Option<i64>,
    /// Bytes, or a string with a unit.
    mem: Option<toml::Value>,
    #[serde(default)]
    hard: bool,
}

/// A standing exchange (spec §2.9): job `a` gives what `a_gives` names to job `b`, for what
/// `b_gives` names. Each side names one resource, in base value.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExchangeTable {
    a: String,
    a_gives: Amounts,
    b: String,
    b_gives: Amounts,
}

/// One side of an exchange: exactly one of the three.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Amounts {
    cpu: Option<i64>,
    disk: Option<i64>,
    /// Bytes, or a string with a unit.
    mem: Option<toml::Value>,
}

/// Who holds a funding list, for errors.
struct Holder<'a> {
    table: &'static str,
    name: &'a str,
    id: CurrencyId,
}

impl fmt::Display for Holder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[[{}]] {:?}", self.table, self.name)
    }
}

struct Builder<'a> {
    file: &'a str,
    machine: &'a Machine,
    /// Currencies and jobs by name; the base is not in it.
    names: BTreeMap<String, (CurrencyId, &'static str)>,
}

impl Builder<'_> {
    fn build(mut self, raw: File) -> Result<Setup, SetupError> {
        let arena = self.arena(&raw.memory)?;
        let mut model = Model::new(self.base_totals(&raw.base, arena)?);
        // Every currency and job exists before any funding, so funding may name a currency
        // defined further down the file.
        let mut holders = Vec::new();
        for (i, c) in raw.currency.iter().enumerate() {
            let id = self.create(&mut model, "currency", i, &c.name, CurrencyKind::Pure)?;
            holders.push((self.holder("currency", &c.name, id), &c.funding));
        }
        let mut jobs = Vec::new();
        for (i, j) in raw.job.iter().enumerate() {
            let kind = CurrencyKind::Client {
                principal: PrincipalId(i as u64),
            };
            let id = self.create(&mut model, "job", i, &j.name, kind)?;
            if j.command.trim().is_empty() {
                return Err(self.error(format!("[[job]] {:?}: command is empty", j.name)));
            }
            holders.push((self.holder("job", &j.name, id), &j.funding));
            jobs.push(JobSetup {
                name: j.name.clone(),
                command: j.command.clone(),
                id,
            });
        }
        for (holder, funding) in holders {
            if funding.is_empty() {
                return Err(self.error(format!(
                    "{holder}: funding is empty: give at least one {{ from = ..., cpu = ... }}"
                )));
            }
            for (i, f) in funding.iter().enumerate() {
                self.fund(&mut model, &holder, i, f)?;
            }
        }
        // After all funding: what a job may give is its R*, which the funding decides.
        for (i, x) in raw.exchange.iter().enumerate() {
            self.exchange(&mut model, i, x)?;
        }
        Ok(Setup {
            model,
            jobs,
            arena: arena.map(|a| a as u64),
        })
    }

    fn arena(&self, memory: &MemoryTable) -> Result<Option<i64>, SetupError> {
        let Some(v) = &memory.arena else {
            return Ok(None);
        };
        match self.bytes(v) {
            Ok(b) if b > MAX_AMOUNT => Err(self.error(format!(
                "[memory] arena = {b}: an arena (the default hard total of memory) is at most \
                 {MAX_AMOUNT} bytes"
            ))),
            Ok(b) if b > 0 => Ok(Some(b)),
            Ok(b) => Err(self.error(format!(
                "[memory] arena = {b}: an arena holds a positive number of bytes"
            ))),
            Err(e) => Err(self.error(format!("[memory] arena: {e}"))),
        }
    }

    /// `H(base,r)`: `[base]`'s, else 1000 for CPU and disk, and for memory the arena when there
    /// is one (what the jobs may reserve is what they share), else the machine's reservable memory.
    fn base_totals(
        &self,
        base: &BaseTable,
        arena: Option<i64>,
    ) -> Result<PerResource<i64>, SetupError> {
        let mut totals = PerResource::from_fn(|_| DEFAULT_TOTAL);
        totals[Resource::Mem] = arena.unwrap_or(self.machine.reservable_mem);
        let given = [
            (Resource::Cpu, base.cpu),
            (Resource::Disk, base.disk),
            (
                Resource::Mem,
                base.mem
                    .as_ref()
                    .map(|v| self.bytes(v))
                    .transpose()
                    .map_err(|e| self.error(format!("[base] mem: {e}")))?,
            ),
        ];
        for (r, v) in given {
            match v {
                Some(v) if v <= 0 => {
                    return Err(self.error(format!("[base] {r} = {v}: a hard total is positive")))
                }
                Some(v) if v > MAX_AMOUNT => {
                    return Err(self.error(format!(
                        "[base] {r} = {v}: a hard total is at most {MAX_AMOUNT}"
                    )))
                }
                Some(v) => totals[r] = v,
                None => {}
            }
        }
        Ok(totals)
    }

    fn create(
        &mut self,
        model: &mut Model,
        table: &'static str,
        index: usize,
        name: &str,
        kind: CurrencyKind,
    ) -> Result<CurrencyId, SetupError> {
        if name.trim().is_empty() {
            return Err(self.error(format!("[[{table}]] #{}: name is empty", index + 1)));
        }
        if name == BASE {
            return Err(self.error(format!(
                "[[{table}]] #{}: name {BASE:?} is reserved for the root currency",
                index + 1
            )));
        }
        if let Some(rule) = name_rule_broken(name) {
            return Err(self.error(format!("[[{table}]] #{}: name {name:?}: {rule}", index + 1)));
        }
        if let Some((_, other)) = self.names.get(name) {
            return Err(self.error(format!(
                "[[{table}]] #{}: name {name:?} is already taken by a [[{other}]]",
                index + 1
            )));
        }
        // The setup is applied by whoever runs tact, so the broker is only bookkeeping here:
        // every currency is the invoking user's, owner-only.
        let broker = Broker {
            owner: nix::unistd::geteuid().as_raw(),
            group: nix::unistd::getegid().as_raw(),
            mode: Mode::OWNER_ONLY,
        };
        let id = model
            .create_currency(kind, name, broker)
            .map_err(|e| self.error(format!("[[{table}]] {name:?}: {e}")))?;
        self.names.insert(name.to_string(), (id, table));
        Ok(id)
    }

    fn holder<'n>(&self, table: &'static str, name: &'n str, id: CurrencyId) -> Holder<'n> {
        Holder { table, name, id }
    }

    fn fund(
        &self,
        model: &mut Model,
        holder: &Holder,
        index: usize,
        f: &Funding,
    ) -> Result<(), SetupError> {
        let at = format!("{holder}, funding[{index}]");
        let issuer = match f.from.as_str() {
            BASE => CurrencyId::BASE,
            name => match self.names.get(name) {
                Some((id, "currency")) => *id,
                Some(_) => {
                    return Err(self.error(format!(
                        "{at}.from: {name:?} is a job: jobs hold tickets, only currencies and \
                         {BASE:?} issue them"
                    )))
                }
                None => {
                    return Err(self.error(format!(
                        "{at}.from: unknown currency {name:?} (define it in a [[currency]] table, \
                         or write {BASE:?})"
                    )))
                }
            },
        };
        let mem = f
            .mem
            .as_ref()
            .map(|v| self.bytes(v))
            .transpose()
            .map_err(|e| self.error(format!("{at}.mem: {e}")))?;
        let amounts = [
            (Resource::Cpu, f.cpu),
            (Resource::Disk, f.disk),
            (Resource::Mem, mem),
        ];
        if amounts.iter().all(|(_, a)| a.is_none()) {
            return Err(self.error(format!(
                "{at}: no amount: give one or more of cpu, disk and mem"
            )));
        }
        let kind = if f.hard { Kind::Hard } else { Kind::Soft };
        for (r, amount) in amounts {
            let Some(amount) = amount else { continue };
            if amount <= 0 {
                return Err(self.error(format!("{at}.{r} = {amount}: ticket amounts are positive")));
            }
            if amount > MAX_AMOUNT {
                return Err(self.error(format!(
                    "{at}.{r} = {amount}: ticket amounts are at most {MAX_AMOUNT}"
                )));
            }
            model
                .issue(issuer, holder.id, r, amount, kind)
                .map_err(|e| self.error(format!("{at}.{r}: {}", self.explain(model, &e))))?;
        }
        Ok(())
    }

    /// Carries out `[[exchange]]` number `index` (from 0) on the funded model.
    fn exchange(
        &self,
        model: &mut Model,
        index: usize,
        x: &ExchangeTable,
    ) -> Result<(), SetupError> {
        let at = format!("[[exchange]] #{}", index + 1);
        let a = self.participant(&at, "a", &x.a)?;
        let b = self.participant(&at, "b", &x.b)?;
        if a == b {
            return Err(self.error(format!(
                "{at}: a and b are both {:?}: a job cannot exchange with itself",
                x.a
            )));
        }
        let give = self.side(&at, "a_gives", &x.a_gives)?;
        let get = self.side(&at, "b_gives", &x.b_gives)?;
        if give.0 == get.0 {
            return Err(self.error(format!(
                "{at}: a_gives and b_gives are both {}: an exchange trades two different resources",
                give.0
            )));
        }
        // §2.9: no one may give more than its guaranteed rights R*. The model itself checks only
        // participants that compete now, and in a setup none does yet.
        for (field, name, id, (r, n)) in [("a_gives", &x.a, a, give), ("b_gives", &x.b, b, get)] {
            let guaranteed = model.guaranteed(id, r).map_err(|e| {
                self.error(format!("{at}.{field}.{r}: {}", self.explain(model, &e)))
            })?;
            if n as f64 > guaranteed + 1e-9 * guaranteed.abs().max(1.0) {
                let earlier = if index > 0 {
                    " (after the exchanges above this one)"
                } else {
                    ""
                };
                // `+ 0.0` prints a zero computed as -0 as 0.
                return Err(self.error(format!(
                    "{at}.{field}.{r} = {n}: {name:?} holds rights R* = {:.1} of {r}{earlier}, \
                     so it cannot give {n}",
                    guaranteed + 0.0
                )));
            }
        }
        model
            .create_exchange(a, give, b, get)
            .map_err(|e| self.error(format!("{at}: {}", self.explain(model, &e))))?;
        Ok(())
    }

    /// The job an exchange names in `field`.
    fn participant(&self, at: &str, field: &str, name: &str) -> Result<CurrencyId, SetupError> {
        match self.names.get(name) {
            Some((id, "job")) => Ok(*id),
            Some((_, table)) => Err(self.error(format!(
                "{at}.{field}: {name:?} is a [[{table}]]: only jobs exchange (they hold the rights)"
            ))),
            None if name == BASE => Err(self.error(format!(
                "{at}.{field}: {BASE:?} issues the exchange's tickets and cannot be a party to it"
            ))),
            None => Err(self.error(format!(
                "{at}.{field}: unknown job {name:?} (define it in a [[job]] table)"
            ))),
        }
    }

    /// One side of an exchange: exactly one positive amount.
    fn side(&self, at: &str, field: &str, side: &Amounts) -> Result<(Resource, i64), SetupError> {
        let mem = side
            .mem
            .as_ref()
            .map(|v| self.bytes(v))
            .transpose()
            .map_err(|e| self.error(format!("{at}.{field}.mem: {e}")))?;
        let given: Vec<(Resource, i64)> = [
            (Resource::Cpu, side.cpu),
            (Resource::Disk, side.disk),
            (Resource::Mem, mem),
        ]
        .into_iter()
        .filter_map(|(r, n)| n.map(|n| (r, n)))
        .collect();
        let &[(r, n)] = given.as_slice() else {
            return Err(self.error(format!(
                "{at}.{field}: give exactly one of cpu, disk and mem (one resource per side)"
            )));
        };
        if n <= 0 {
            return Err(self.error(format!("{at}.{field}.{r} = {n}: amounts are positive")));
        }
        if n > MAX_AMOUNT {
            return Err(self.error(format!(
                "{at}.{field}.{r} = {n}: amounts are at most {MAX_AMOUNT}"
            )));
        }
        Ok((r, n))
    }

    /// A model refusal in the file's names rather than the model's ids.
    fn explain(&self, model: &Model, e: &TicketsError) -> String {
        let name = |c: CurrencyId| {
            model
                .currency(c)
                .map_or_else(|_| c.to_string(), |c| c.name.clone())
        };
        match e {
            TicketsError::Cycle { issuer, holder } => format!(
                "funding {} from {} would close a cycle: {} is already funded, directly or not, \
                 by {}",
                name(*holder),
                name(*issuer),
                name(*issuer),
                name(*holder)
            ),
            TicketsError::HardTotalExceeded {
                currency,
                resource,
                would,
                total,
            } => format!(
                "{} would issue {would} of {resource} in hard tickets, above its hard total {total}",
                name(*currency)
            ),
            other => other.to_string(),
        }
    }

    /// A memory amount: integer bytes, or a string with a unit.
    fn bytes(&self, v: &toml::Value) -> Result<i64, String> {
        match v {
            toml::Value::Integer(n) => Ok(*n),
            toml::Value::String(s) => parse_size(s, self.machine.page_size),
            other => Err(format!(
                "expected bytes or a size string like \"512MiB\" or \"1375pages\", got a {}",
                other.type_str()
            )),
        }
    }

    fn error(&self, what: String) -> SetupError {
        SetupError(format!("{}: {what}", self.file))
    }
}

/// `"5632000"`, `"512MiB"`, `"1375pages"`: bytes, binary units or pages (spec §4: tact counts
/// memory in bytes and accepts KiB/MiB/GiB/pages).
pub fn parse_size(s: &str, page_size: u64) -> Result<i64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let bad =
        || format!("{s:?} is not a size: write bytes or a unit, like \"512MiB\" or \"1375pages\"");
    let n: i64 = number.parse().map_err(|_| bad())?;
    let unit: i64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "page" | "pages" => page_size as i64,
        _ => return Err(bad()),
    };
    n.checked_mul(unit)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A TOML or schema error on one line: `FILE:LINE:COLUMN: in [TABLE]: message`.
fn syntax_error(file: &str, text: &str, e: &toml::de::Error) -> SetupError {
    let message = e.message().trim().replace('\n', " ");
    let Some(span) = e.span() else {
        return SetupError(format!("{file}: {message}"));
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    // The table the error is in: the last header above it, or on its line.
    let line_end = text[before.len()..]
        .find('\n')
        .map_or(text.len(), |i| before.len() + i);
    let table = text[..line_end]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.split('#').next().unwrap_or(l).trim());
    match table {
        Some(t) => SetupError(format!("{file}:{line}:{column}: in {t}: {message}")),
        None => SetupError(format!("{file}:{line}:{column}: {message}")),
    }
}

/// The rule a currency or job name breaks, if any: names are one word printed in the tables, and
/// `(` and `)` belong to the model's hidden `soft_tix(NAME)` currencies.
fn name_rule_broken(name: &str) -> Option<&'static str> {
    if name.contains(['(', ')']) {
        Some(tact_core::tickets::PARENS_RESERVED)
    } else if name.contains(|c: char| c.is_control() || c.is_whitespace()) {
        Some("names may not contain whitespace or control characters")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACHINE: Machine = Machine {
        page_size: 4096,
        reservable_mem: 1 << 30,
    };

    /// Spec tickets.md E1, as shipped in contrib/.
    const E1: &str = include_str!("../../../../contrib/tickets/e1.toml");

    fn parse(text: &str) -> Result<Setup, SetupError> {
        Setup::parse(text, "s.toml", &MACHINE)
    }

    fn err(text: &str) -> String {
        let e = parse(text).unwrap_err().0;
        assert!(!e.contains('\n'), "one line: {e}");
        e
    }

    fn shares(setup: &Setup) -> BTreeMap<String, f64> {
        let by_id: BTreeMap<CurrencyId, f64> =
            setup.model.shares(Resource::Cpu).into_iter().collect();
        setup
            .jobs
            .iter()
            .filter_map(|j| by_id.get(&j.id).map(|s| (j.name.clone(), *s)))
            .collect()
    }

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() < 1e-9
    }

    #[test]
    fn e1_gives_the_spec_shares_with_all_active_and_with_b3_asleep() {
        let mut setup = parse(E1).unwrap();
        for j in &setup.jobs {
            setup.model.set_active(j.id, Resource::Cpu, true).unwrap();
        }
        let all = shares(&setup);
        let want = [
            ("A1", 1.0 / 6.0),
            ("A2", 1.0 / 3.0),
            ("B1", 1.0 / 12.0),
            ("B2", 1.0 / 6.0),
            ("B3", 1.0 / 4.0),
        ];
        for (name, share) in want {
            assert!(close(all[name], share), "{name}: {all:?}");
        }
        let b3 = setup.job("B3").unwrap().id;
        setup.model.set_active(b3, Resource::Cpu, false).unwrap();
        let asleep = shares(&setup);
        for (name, share) in [
            ("A1", 1.0 / 6.0),
            ("A2", 1.0 / 3.0),
            ("B1", 1.0 / 6.0),
            ("B2", 1.0 / 3.0),
        ] {
            assert!(close(asleep[name], share), "{name}: {asleep:?}");
        }
        assert!(!asleep.contains_key("B3"));
        // R* does not depend on who competes.
        let g = setup.model.guaranteed(b3, Resource::Cpu).unwrap();
        assert!(close(g, 500.0), "{g}");
        setup.model.check_exact().unwrap();
    }

    /// Spec E4: two spinners (D, S) and five readers (I, H1..H4), each funded 1000 CPU and 1000
    /// disk from the base; with `n > 0`, D gives I n disk for n CPU.
    fn e4(n: i64) -> String {
        let mut text = String::new();
        for job in ["D", "S", "I", "H1", "H2", "H3", "H4"] {
            text.push_str(&format!(
                "[[job]]\nname = \"{job}\"\ncommand = \"x\"\n\
                 funding = [{{ from = \"base\", cpu = 1000, disk = 1000 }}]\n"
            ));
        }
        if n > 0 {
            text.push_str(&format!(
                "[[exchange]]\na = \"D\"\na_gives = {{ disk = {n} }}\nb = \"I\"\n\
                 b_gives = {{ cpu = {n} }}\n"
            ));
        }
        text
    }

    /// Each job's (R, R*) for CPU and disk, with the spinners competing for the CPU and the
    /// readers for the disk and the CPU (as in E4, where readers wake briefly to issue reads).
    fn e4_rights(setup: &Setup) -> BTreeMap<(String, Resource), (f64, f64)> {
        let mut model = setup.model.clone();
        for j in &setup.jobs {
            let reader = j.name != "D" && j.name != "S";
            model.set_active(j.id, Resource::Cpu, true).unwrap();
            model.set_active(j.id, Resource::Disk, reader).unwrap();
        }
        let mut out = BTreeMap::new();
        for j in &setup.jobs {
            for r in [Resource::Cpu, Resource::Disk] {
                let now = model.rights(j.id, r).unwrap();
                let guaranteed = model.guaranteed(j.id, r).unwrap();
                out.insert((j.name.clone(), r), (now, guaranteed));
            }
        }
        out
    }

    #[test]
    fn an_e4_exchange_moves_exactly_n_and_leaves_the_others_alone() {
        let n = 300.0;
        let before = parse(&e4(0)).unwrap();
        let after = parse(&e4(300)).unwrap();
        assert_eq!(after.model.exchanges().count(), 1);
        after.model.check_exact().unwrap();
        let (was, is) = (e4_rights(&before), e4_rights(&after));
        let change = |job: &str, r: Resource| {
            let key = (job.to_string(), r);
            (is[&key].0 - was[&key].0, is[&key].1 - was[&key].1)
        };
        // The participants: D's CPU and I's disk rise by n, and each pays n of what it gives,
        // whether it competes for it (I's CPU) or not (D's disk: R is 0 while it is idle).
        assert_eq!(change("D", Resource::Cpu), (n, n));
        assert_eq!(change("I", Resource::Disk), (n, n));
        assert_eq!(change("I", Resource::Cpu), (-n, -n));
        assert_eq!(change("D", Resource::Disk), (0.0, -n));
        // Neutrality (§3 invariant 6): every other job keeps its R and R* exactly.
        for job in ["S", "H1", "H2", "H3", "H4"] {
            for r in [Resource::Cpu, Resource::Disk] {
                assert_eq!(change(job, r), (0.0, 0.0), "{job} {r}");
            }
        }
        // And so the sum of R* of each resource.
        for r in [Resource::Cpu, Resource::Disk] {
            let sum = |m: &BTreeMap<(String, Resource), (f64, f64)>| {
                m.iter()
                    .filter(|((_, q), _)| *q == r)
                    .map(|(_, v)| v.1)
                    .sum::<f64>()
            };
            assert_eq!(sum(&was), sum(&is), "{r}");
        }
        // Undoing it restores everything.
        let mut undone = after.clone();
        let x = undone.model.exchanges().next().unwrap().id;
        undone.model.undo_exchange(x).unwrap();
        assert_eq!(e4_rights(&undone), was);
    }

    #[test]
    fn bad_exchanges_are_refused_naming_the_table_and_field() {
        let with = |x: &str| {
            format!(
                "[[currency]]\nname = \"C\"\nfunding = [{{ from = \"base\", cpu = 10 }}]\n\
                 [[job]]\nname = \"D\"\ncommand = \"x\"\n\
                 funding = [{{ from = \"base\", cpu = 1000, disk = 1000 }}]\n\
                 [[job]]\nname = \"I\"\ncommand = \"x\"\n\
                 funding = [{{ from = \"base\", cpu = 1000, disk = 1000 }}]\n\
                 [[exchange]]\n{x}\n"
            )
        };
        let cases = [
            (
                "a = \"C\"\na_gives = { cpu = 5 }\nb = \"I\"\nb_gives = { disk = 5 }",
                "s.toml: [[exchange]] #1.a: \"C\" is a [[currency]]: only jobs exchange",
            ),
            (
                "a = \"D\"\na_gives = { cpu = 5 }\nb = \"Z\"\nb_gives = { disk = 5 }",
                "[[exchange]] #1.b: unknown job \"Z\"",
            ),
            (
                "a = \"base\"\na_gives = { cpu = 5 }\nb = \"I\"\nb_gives = { disk = 5 }",
                "[[exchange]] #1.a: \"base\" issues the exchange's tickets",
            ),
            (
                "a = \"D\"\na_gives = { cpu = 5 }\nb = \"D\"\nb_gives = { disk = 5 }",
                "[[exchange]] #1: a and b are both \"D\"",
            ),
            (
                "a = \"D\"\na_gives = { disk = 5 }\nb = \"I\"\nb_gives = { disk = 7 }",
                "[[exchange]] #1: a_gives and b_gives are both disk: an exchange trades two \
                 different resources",
            ),
            (
                "a = \"D\"\na_gives = { disk = 5, cpu = 1 }\nb = \"I\"\nb_gives = { mem = 7 }",
                "[[exchange]] #1.a_gives: give exactly one of cpu, disk and mem",
            ),
            (
                "a = \"D\"\na_gives = {}\nb = \"I\"\nb_gives = { cpu = 7 }",
                "[[exchange]] #1.a_gives: give exactly one",
            ),
            (
                "a = \"D\"\na_gives = { disk = 0 }\nb = \"I\"\nb_gives = { cpu = 7 }",
                "[[exchange]] #1.a_gives.disk = 0: amounts are positive",
            ),
            (
                "a = \"D\"\na_gives = { disk = 1001 }\nb = \"I\"\nb_gives = { cpu = 7 }",
                "[[exchange]] #1.a_gives.disk = 1001: \"D\" holds rights R* = 1000.0 of disk",
            ),
            (
                "a = \"D\"\na_gives = { disk = 5 }\nb = \"I\"\nb_gives = { mem = \"1MiB\" }",
                "[[exchange]] #1.b_gives.mem = 1048576: \"I\" holds rights R* = 0.0 of mem",
            ),
            (
                "a = \"D\"\na_gives = { disk = 5 }\nb = \"I\"\nb_gives = { mem = \"lots\" }",
                "[[exchange]] #1.b_gives.mem: \"lots\" is not a size",
            ),
            (
                "a = \"D\"\na_gives = { disk = 5 }\nb = \"I\"\nb_gives = { cpu = 5 }\nratio = 2",
                "in [[exchange]]: unknown field `ratio`",
            ),
        ];
        for (x, want) in cases {
            let got = err(&with(x));
            assert!(got.contains(want), "want {want:?}\n got {got:?}");
        }
        // A second exchange sees what the first took: D has 600 of disk left to give.
        let two = format!(
            "{}[[exchange]]\na = \"D\"\na_gives = {{ disk = 601 }}\nb = \"I\"\n\
             b_gives = {{ cpu = 5 }}\n",
            with("a = \"D\"\na_gives = { disk = 400 }\nb = \"I\"\nb_gives = { cpu = 5 }")
        );
        assert!(
            err(&two).contains("[[exchange]] #2.a_gives.disk = 601: \"D\" holds rights R* = 600.0"),
            "{}",
            err(&two)
        );
        // Giving all of it is allowed.
        parse(&with(
            "a = \"D\"\na_gives = { disk = 1000 }\nb = \"I\"\nb_gives = { cpu = 1000 }",
        ))
        .unwrap();
    }

    #[test]
    fn memory_units_hard_tickets_and_base_totals() {
        let setup = parse(
            r#"
[base]
mem = "8MiB"
disk = 2000

[[job]]
name = "D"
command = "exec reader"
funding = [{ from = "base", disk = 1000, mem = "1375pages", hard = true },
           { from = "base", cpu = 5 }]

[[job]]
name = "E"
command = "exec reader"
funding = [{ from = "base", mem = 5632000 }]
"#,
        )
        .unwrap();
        let m = &setup.model;
        assert_eq!(m.base_hard_total()[Resource::Mem], 8 << 20);
        assert_eq!(m.base_hard_total()[Resource::Disk], 2000);
        assert_eq!(m.base_hard_total()[Resource::Cpu], DEFAULT_TOTAL);
        let d = setup.job("D").unwrap().id;
        // Hard: a fixed fraction of the base, 1375 pages of 8 MiB.
        assert!(close(
            m.guaranteed(d, Resource::Mem).unwrap(),
            1375.0 * 4096.0
        ));
        assert!(close(m.guaranteed(d, Resource::Disk).unwrap(), 1000.0));
        let e = setup.job("E").unwrap().id;
        assert!(close(m.guaranteed(e, Resource::Cpu).unwrap(), 0.0));
        assert_eq!(parse_size("512MiB", 4096), Ok(512 << 20));
        assert_eq!(parse_size(" 5632000 ", 4096), Ok(5_632_000));
        assert!(parse_size("1.5GiB", 4096).is_err());
        assert!(parse_size("12 parsecs", 4096).is_err());
    }

    #[test]
    fn an_arena_is_the_base_memory_unless_base_says_otherwise() {
        let job = "[[job]]\nname = \"S\"\ncommand = \"x\"\n\
                   funding = [{ from = \"base\", mem = \"1375pages\", hard = true }]\n";
        let s = parse(&format!("[memory]\narena = \"16MiB\"\n{job}")).unwrap();
        assert_eq!(s.arena, Some(16 << 20));
        assert_eq!(s.model.base_hard_total()[Resource::Mem], 16 << 20);
        let s = parse(&format!(
            "[memory]\narena = \"16MiB\"\n[base]\nmem = \"11MiB\"\n{job}"
        ))
        .unwrap();
        assert_eq!(s.model.base_hard_total()[Resource::Mem], 11 << 20);
        assert_eq!(parse(job).unwrap().arena, None);
        assert!(err("[memory]\narena = 0\n").contains("s.toml: [memory] arena = 0: an arena holds"));
        assert!(
            err("[memory]\narena = \"lots\"\n").contains("[memory] arena: \"lots\" is not a size")
        );
        assert!(err("[memory]\nsize = 3\n").contains("in [memory]: unknown field `size`"));
    }

    #[test]
    fn every_error_names_the_file_table_and_field() {
        let job = |funding: &str| {
            format!("[[currency]]\nname = \"A\"\nfunding = [{{ from = \"base\", cpu = 10 }}]\n\n[[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{funding}]\n")
        };
        let cases: Vec<(String, &str)> = vec![
            (job("{ from = \"C\", cpu = 1 }"), "s.toml: [[job]] \"J\", funding[0].from: unknown currency \"C\""),
            (job("{ from = \"A\", cpu = 0 }"), "s.toml: [[job]] \"J\", funding[0].cpu = 0: ticket amounts are positive"),
            (job("{ from = \"A\", disk = -3 }"), "funding[0].disk = -3: ticket amounts are positive"),
            (job("{ from = \"A\" }"), "funding[0]: no amount"),
            (job("{ from = \"A\", mem = \"lots\" }"), "funding[0].mem: \"lots\" is not a size"),
            (job("{ from = \"A\", mem = 1.5 }"), "funding[0].mem: expected bytes"),
            (job("{ from = \"A\", cpu = 1, colour = 3 }"), "s.toml:8:"),
            (job("{ from = \"J\", cpu = 1 }"), "\"J\" is a job"),
            (job(""), "[[job]] \"J\": funding is empty"),
            (job("{ from = \"base\", cpu = 1500, hard = true }"), "[[job]] \"J\", funding[0].cpu: base would issue 1500 of cpu in hard tickets, above its hard total 1000"),
            (format!("{}{}", job("{ from = \"A\", cpu = 1 }"), "[[job]]\nname = \"A\"\ncommand = \"y\"\nfunding = [{ from = \"base\", cpu = 1 }]\n"), "[[job]] #2: name \"A\" is already taken by a [[currency]]"),
            ("[[currency]]\nname = \"base\"\nfunding = []\n".into(), "name \"base\" is reserved"),
            ("[[currency]]\nname = \"P\"\nfunding = [{ from = \"Q\", cpu = 1 }]\n[[currency]]\nname = \"Q\"\nfunding = [{ from = \"P\", cpu = 1 }]\n".into(), "[[currency]] \"Q\", funding[0].cpu: funding Q from P would close a cycle"),
            ("[base]\ncpu = 0\n".into(), "[base] cpu = 0: a hard total is positive"),
            ("[[job]]\nname = \"J\"\nfunding = [{ from = \"base\", cpu = 1 }]\n".into(), "s.toml:1:1: in [[job]]: missing field `command`"),
            ("[[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"base\", cpu = 1 }]\nnice = 3\n".into(), "s.toml:5:1: in [[job]]: unknown field `nice`"),
            ("[bases]\ncpu = 1\n".into(), "s.toml:1:2: in [bases]: unknown field `bases`, expected one of `base`"),
            ("[[job]\n".into(), "s.toml:1:"),
        ];
        for (text, want) in cases {
            let got = err(&text);
            assert!(
                got.contains(want),
                "want {want:?}\n got {got:?}\n in {text}"
            );
        }
    }
}

//! The nouns of the tickets model (spec tickets.md §2): resources, identifiers, tickets, brokers'
//! modes and callers. Everything else in [`crate::tickets`] is built from these.

use std::fmt;
use std::ops::{Index, IndexMut};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The three resources rights are held in. Tickets never convert between them (§2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    Cpu,
    Mem,
    Disk,
}

impl Resource {
    pub const ALL: [Resource; 3] = [Resource::Cpu, Resource::Mem, Resource::Disk];

    /// Position in a [`PerResource`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Mem => "mem",
            Resource::Disk => "disk",
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Resource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Resource::Cpu),
            "mem" | "memory" => Ok(Resource::Mem),
            "disk" | "io" => Ok(Resource::Disk),
            _ => Err(format!(
                "unknown resource {s:?} (expected cpu, mem or disk)"
            )),
        }
    }
}

/// One value per resource, indexed by [`Resource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
pub struct PerResource<T>(pub [T; 3]);

impl<T> PerResource<T> {
    pub fn from_fn(mut f: impl FnMut(Resource) -> T) -> Self {
        PerResource(Resource::ALL.map(&mut f))
    }

    pub fn iter(&self) -> impl Iterator<Item = (Resource, &T)> {
        Resource::ALL.into_iter().zip(self.0.iter())
    }
}

impl<T> Index<Resource> for PerResource<T> {
    type Output = T;
    fn index(&self, r: Resource) -> &T {
        &self.0[r.index()]
    }
}

impl<T> IndexMut<Resource> for PerResource<T> {
    fn index_mut(&mut self, r: Resource) -> &mut T {
        &mut self.0[r.index()]
    }
}

/// A currency. [`CurrencyId::BASE`] is the root that issues unbacked tickets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CurrencyId(pub u32);

impl CurrencyId {
    pub const BASE: CurrencyId = CurrencyId(0);
}

impl fmt::Display for CurrencyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// A ticket, unique over the model's lifetime (ids are never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TicketId(pub u64);

impl fmt::Display for TicketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}", self.0)
    }
}

/// An exchange: the ring of four base tickets the dealer issued together (§2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExchangeId(pub u64);

impl fmt::Display for ExchangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "x{}", self.0)
    }
}

/// A queued offer at the dealer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OfferId(pub u64);

impl fmt::Display for OfferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "o{}", self.0)
    }
}

/// A schedulable principal: a process, or any id the daemon gives a group it schedules as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PrincipalId(pub u64);

/// What a currency is (§2.2, §2.5, §2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CurrencyKind {
    /// The root; issues unbacked tickets; indestructible.
    Base,
    /// A pure currency: a group of holders, active while any ticket it issued is active.
    Pure,
    /// A client currency: a schedulable principal with an implicit self ticket (§2.2: `R(k,r)`).
    Client { principal: PrincipalId },
    /// The hidden subcurrency that issues a currency's soft tickets once it has issued a hard one
    /// (§2.5).
    SoftTix { of: CurrencyId },
}

/// Hard tickets are fixed fractions of their issuer's value; soft ones relative shares (§2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Soft,
    Hard,
}

/// An issuer→holder funding edge. `amount` is positive except for an exchange's negative
/// tickets; memory amounts of the base are bytes, every other amount has no unit (§2.1, §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    pub id: TicketId,
    pub issuer: CurrencyId,
    pub holder: CurrencyId,
    pub resource: Resource,
    pub amount: i64,
    pub kind: Kind,
    pub exchange: Option<ExchangeId>,
}

/// A broker permission bit (§2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Perm {
    /// May fund the currency.
    Fund,
    /// May change it: unfund or destroy it.
    Change,
    /// May issue or revoke its tickets.
    Issue,
}

impl Perm {
    pub fn letter(self) -> char {
        match self {
            Perm::Fund => 'f',
            Perm::Change => 'c',
            Perm::Issue => 'i',
        }
    }
}

impl fmt::Display for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Perm::Fund => "f (fund)",
            Perm::Change => "c (change)",
            Perm::Issue => "i (issue)",
        })
    }
}

/// Owner, group and other triplets of [`Perm`] bits, written like `fci/f--/---` (§2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Mode {
    pub owner: [bool; 3],
    pub group: [bool; 3],
    pub other: [bool; 3],
}

impl Mode {
    /// The default of the base and of user currencies: `fci/---/---`.
    pub const OWNER_ONLY: Mode = Mode {
        owner: [true; 3],
        group: [false; 3],
        other: [false; 3],
    };

    fn slot(p: Perm) -> usize {
        match p {
            Perm::Fund => 0,
            Perm::Change => 1,
            Perm::Issue => 2,
        }
    }

    pub fn owner_has(&self, p: Perm) -> bool {
        self.owner[Self::slot(p)]
    }
    pub fn group_has(&self, p: Perm) -> bool {
        self.group[Self::slot(p)]
    }
    pub fn other_has(&self, p: Perm) -> bool {
        self.other[Self::slot(p)]
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let triplet = |bits: &[bool; 3]| -> String {
            [Perm::Fund, Perm::Change, Perm::Issue]
                .iter()
                .zip(bits)
                .map(|(p, on)| if *on { p.letter() } else { '-' })
                .collect()
        };
        write!(
            f,
            "{}/{}/{}",
            triplet(&self.owner),
            triplet(&self.group),
            triplet(&self.other)
        )
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad =
            || format!("mode {s:?}: expected three triplets of f, c, i or -, like fci/f--/---");
        let parts: Vec<&str> = s.split('/').collect();
        if parts.len() != 3 {
            return Err(bad());
        }
        let mut out = [[false; 3]; 3];
        for (triplet, bits) in parts.iter().zip(out.iter_mut()) {
            let chars: Vec<char> = triplet.chars().collect();
            if chars.len() != 3 {
                return Err(bad());
            }
            for ((c, want), bit) in chars.iter().zip(['f', 'c', 'i']).zip(bits.iter_mut()) {
                match *c {
                    '-' => {}
                    c if c == want => *bit = true,
                    _ => return Err(bad()),
                }
            }
        }
        Ok(Mode {
            owner: out[0],
            group: out[1],
            other: out[2],
        })
    }
}

impl TryFrom<String> for Mode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Mode> for String {
    fn from(m: Mode) -> String {
        m.to_string()
    }
}

/// Who controls a currency (§2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broker {
    pub owner: u32,
    pub group: u32,
    pub mode: Mode,
}

/// Who asks: the uid and groups the daemon learned from the socket's peer credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub uid: u32,
    pub gids: Vec<u32>,
}

impl Caller {
    pub const ROOT_UID: u32 = 0;

    pub fn root() -> Caller {
        Caller {
            uid: Self::ROOT_UID,
            gids: vec![0],
        }
    }

    pub fn is_root(&self) -> bool {
        self.uid == Self::ROOT_UID
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_and_bad_ones_are_refused() {
        for s in ["fci/---/---", "fci/f--/--i", "---/---/---"] {
            assert_eq!(s.parse::<Mode>().unwrap().to_string(), s);
        }
        assert_eq!("fci/---/---".parse::<Mode>().unwrap(), Mode::OWNER_ONLY);
        for s in [
            "fci",
            "fci/---",
            "icf/---/---",
            "fcix/---/---",
            "fci/---/--x",
        ] {
            assert!(s.parse::<Mode>().is_err(), "{s}");
        }
    }

    #[test]
    fn per_resource_indexes_by_resource() {
        let mut p = PerResource::from_fn(|r| r.index() * 10);
        p[Resource::Disk] += 1;
        assert_eq!(p.0, [0, 10, 21]);
        assert_eq!("memory".parse::<Resource>(), Ok(Resource::Mem));
    }
}

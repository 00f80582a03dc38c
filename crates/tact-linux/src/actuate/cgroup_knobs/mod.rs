//! The cgroup knobs the tickets model compiles into (spec tickets §4): a tact-owned subtree of
//! cgroups in each hierarchy it needs, with CPU weights, memory protections and limits, and disk
//! weights, on cgroup v1 or v2 as detected, never assumed.
//!
//! * [`hierarchy`]: where the `cpu`, `memory` and `io`/`blkio` controllers are mounted
//!   ([`Hierarchies::detect_in`] takes the mountinfo file, filesystem root and procfs, so the v2
//!   paths are tested on fixture trees). A missing controller is an error naming it and the
//!   fallback.
//! * [`tree`]: [`KnobTree`] creates `BASE/NAME` and nodes below it, nested (the tree mirror:
//!   currencies as nested cgroups) or flat, in every hierarchy the tree uses, moves processes in
//!   and back out, and removes it all deepest first on teardown or drop. On v2 it enables the
//!   controllers in a parent's `cgroup.subtree_control` before creating its first child.
//! * [`knobs`]: the writers, each clamping to the kernel's range and reporting the clamp
//!   ([`KnobWrite`]).
//! * [`usage`]: what `tact tickets explain` shows as measured: CPU time, memory in use and disk
//!   bytes per node.
//!
//! Protection in a v2 tree is hierarchical: a child's `memory.min`/`memory.low` counts only up to
//! what its parent is given, so [`KnobTree::set_mem_protection`] sets each node above, up to the
//! tree's top, to the sum of its children's, and says when a cgroup above the top is given less.

pub mod hierarchy;
pub mod knobs;
pub mod tree;
pub mod usage;

pub use hierarchy::{Controller, ControllerMount, Hierarchies};
pub use knobs::{Clamp, DiskKnob, KnobWrite, MemProtection};
pub use tree::{KnobTree, NodeId};
pub use usage::DiskBytes;

//! Throughput-guided concurrency control (TCC; Tang et al., spec `concurrency.md`).
//!
//! A pool's host reports completions (and when its workers take tasks, and when its queue runs
//! dry) with its own monotonic time; [`Tcc`] answers with the number of workers to run. It holds
//! the count just before the throughput curve bends (85–95% bottleneck utilization), exploring
//! in cycles: Base cuts the count by w and measures it, Add raises it by p while each step gains
//! at least q, Max measures the last count longer, Remove lowers it by r while throughput stays
//! within δ of the cycle's best, and Steady holds the result until a timeout or a throughput
//! shift. Decisions use a sequential test with an indifference zone over batch means of
//! trimmed busy-time samples ([`decide`]). Parameters are checked against Theorem 1's
//! friendliness conditions ([`params::check_friendly`]).
//!
//! A host that can see the bottleneck may also report its utilization ([`Policy::on_hint`]):
//! while it stays below `TuneParams::util`, an add step that gains less than q still counts
//! (beyond the paper; inert on a saturated bottleneck, so Theorem 1's bound stands); a
//! steady count that had room ends early when the bottleneck becomes saturated (`saturated`),
//! and one that keeps it below `util − room` climbs again from its count (`room`).
//! Coordinated with other instances, a steady count above its fair share of a bottleneck above
//! `util` is judged again beside them (the crowding rule), and the hint does not undo a
//! removal that leaves the instance at or above its fair share.
//!
//! With `TuneParams::psi` on, pressure stall readings ([`Policy::on_pressure`]) may stop a rise,
//! start a cycle early, or cut a stalling count in Max or Remove back to its base (spec §6
//! item 3), never raise the count.
//!
//! A host that cannot see whether its pool is saturated says so
//! ([`Policy::saturation_unseen`]); a gap between completions longer than ten mean gaps then
//! counts as starvation (spec §6; [`gaps::GapRule`]).
//!
//! Instances that share a bottleneck can be coordinated by their hosts ([`Policy::coordinate`]):
//! a cycle then starts only when the host grants a turn ([`Policy::grant_turn`]), one explorer
//! at a time or all at a shared epoch (spec §6 item 4; `turns`).
//!
//! [`freeze`] decides which of a fixed pool's workers `tact tune --freeze` stops to hold the
//! count the controller asks.
//!
//! The contract shared with other controllers is [`Policy`]; `docs/tune.md` describes the
//! choices made where the paper is silent or wrong.

pub mod baselines;
pub mod decide;
pub mod freeze;
pub mod gaps;
pub mod params;
mod policy;
mod samples;
pub mod select;
mod tcc;
mod turns;

pub use baselines::{
    Aimd, AimdParams, AimdTimeout, BaselineError, Bounds, Envoy, EnvoyParams, Fixed, Gradient2,
    Gradient2Params, HillClimbing, HillClimbingParams, Vegas, VegasBaseline, VegasParams,
    VegasPlus, VegasPlusParams,
};
pub use decide::Outcome;
pub use params::{check_friendly, Friendly, ParamError, TuneParams, TABLE_1, TABLE_1_PRINTED};
pub use policy::{Event, Load, Phase, Policy, Pressure, Reason, Transition};
pub use samples::{SampleSet, Summary};
pub use select::{policy_from_spec, tcc_params_from_spec, SpecError, POLICY_NAMES};
pub use tcc::{Decision, Status, Tcc};

//! `tact demo` (being written).

mod work;

use anyhow::Result;

use crate::cli::{DemoArgs, WorkArgs};

pub fn run(_args: &DemoArgs) -> Result<()> {
    anyhow::bail!("tact demo is not written yet")
}

pub fn work(args: &WorkArgs) -> Result<()> {
    work::work(&args.kind, &args.args)
}

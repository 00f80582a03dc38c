//! `--workers-file PATH`: the count of jobs as a decimal number in a file, for programs that
//! re-read one (GNU parallel's `-j PATH` does after each job).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub struct WorkersFile {
    path: PathBuf,
    /// Written first, then renamed over `path`, so that a reader never sees a half-written
    /// number (an empty file would read as 0 jobs, or as an error).
    temp: PathBuf,
}

impl WorkersFile {
    pub fn new(path: &Path) -> Result<Self> {
        let name = path
            .file_name()
            .with_context(|| format!("--workers-file {}: not a file name", path.display()))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".tact-{}.tmp", std::process::id()));
        Ok(WorkersFile {
            path: path.to_path_buf(),
            temp: path.with_file_name(temp_name),
        })
    }

    pub fn write(&self, target: usize) -> Result<()> {
        fs::write(&self.temp, format!("{target}\n"))
            .and_then(|()| fs::rename(&self.temp, &self.path))
            .with_context(|| format!("cannot write --workers-file {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs");
        let f = WorkersFile::new(&path).unwrap();
        f.write(3).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "3\n");
        f.write(12).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "12\n");
        // Nothing but the file itself is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_directory_is_named() {
        let e = WorkersFile::new(Path::new("/nonexistent-tact-dir/jobs"))
            .unwrap()
            .write(1)
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("/nonexistent-tact-dir/jobs"),
            "{e:#}"
        );
    }
}

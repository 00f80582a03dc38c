//! What the gate watches: cumulative bytes a disk or a link has moved, read from the kernel's
//! counters (tact-linux probes), or scripted by a test.

use tact_linux::probe::block_device::BlockResolver;
use tact_linux::probe::diskstats::{DiskstatsReader, SECTOR_BYTES};
use tact_linux::probe::netstats::NetReader;

use super::IdleError;

/// A resource's activity counter. The gate reads it at every poll and at the end of each of the
/// program's own requests; foreground activity is the growth between two reads less the
/// program's own reported bytes.
pub trait Sampler: Send {
    /// Bytes moved (both directions) since an arbitrary origin. Only differences matter; a
    /// counter that goes backwards (a device re-created) reads as no activity.
    fn bytes(&mut self) -> Result<u64, IdleError>;

    /// How many bytes of the counter `own` bytes of the program's requests account for. Disks
    /// count exactly what was read or written; see [`NetSampler`] for links.
    fn own_share(&self, own: u64) -> u64 {
        own
    }
}

/// The whole physical disks under a device or path, from `/proc/diskstats`. A partition's
/// activity is watched on its disk, and a dm/md device's on the disks below it, since foreground
/// I/O to another partition or volume queues in the same drive.
#[derive(Debug)]
pub struct DiskSampler {
    reader: DiskstatsReader,
    disks: Vec<String>,
}

impl DiskSampler {
    /// `spec` is a kernel name (`vda`, `sda1`, `dm-0`), a `/dev` path, or any absolute path
    /// (the disk under its mount).
    pub fn new(spec: &str) -> Result<Self, IdleError> {
        let device = BlockResolver::new().resolve(spec)?;
        let mut sampler = DiskSampler {
            reader: DiskstatsReader::new(),
            disks: device.disks,
        };
        // Fail at build time, naming the disk, rather than at the first acquire.
        sampler.bytes()?;
        Ok(sampler)
    }

    /// The disks watched (kernel names).
    pub fn disks(&self) -> &[String] {
        &self.disks
    }
}

impl Sampler for DiskSampler {
    fn bytes(&mut self) -> Result<u64, IdleError> {
        // One read of the file for all disks: a poll reads it every δ.
        let all = self.reader.read_all()?;
        let mut total = 0;
        for disk in &self.disks {
            match all.iter().find(|d| &d.name == disk) {
                Some(d) => total += (d.sectors_read + d.sectors_written) * SECTOR_BYTES,
                None => {
                    return Err(tact_linux::Error::UnknownDevice {
                        kind: "block device",
                        name: disk.clone(),
                        hint: format!(
                            "it was there when the gate was built; {} no longer lists it",
                            self.reader.path().display()
                        ),
                    }
                    .into())
                }
            }
        }
        Ok(total)
    }
}

/// A network interface, from `/sys/class/net/IFACE/statistics/{rx,tx}_bytes`. Receive traffic
/// counts too: an ACK-clocked foreground TCP flow shows up there.
#[derive(Debug)]
pub struct NetSampler {
    reader: NetReader,
    iface: String,
}

impl NetSampler {
    pub fn new(iface: &str) -> Result<Self, IdleError> {
        let reader = NetReader::new();
        reader.check_interface(iface)?;
        Ok(NetSampler {
            reader,
            iface: iface.to_string(),
        })
    }
}

impl Sampler for NetSampler {
    fn bytes(&mut self) -> Result<u64, IdleError> {
        Ok(self.reader.counters(&self.iface)?.bytes())
    }

    /// The program reports payload bytes, but the link counts headers too (52–66 bytes per
    /// 1448-byte TCP segment, and the ACKs coming back: about 7% together), so a program that
    /// reported its sends exactly would see its own headers as foreground: an eighth more covers
    /// them. Loopback (`lo`, in any namespace) counts every packet twice, sent and received.
    fn own_share(&self, own: u64) -> u64 {
        let wire = own.saturating_add(own / 8);
        match self.iface == "lo" {
            true => wire.saturating_mul(2),
            false => wire,
        }
    }
}

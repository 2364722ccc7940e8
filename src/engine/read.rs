//! Reading records back: a message's payload record, a failure history, a dead-letter
//! envelope, or many records in a row ([`RecordReader`]). Every read is counted (tests use
//! the count to show which calls read nothing), and a record whose content does not decode
//! is reported as corruption at its position.

use std::sync::atomic::Ordering;

use super::envelope::FailureInfo;
use super::record::{Decoded, History, Op, PutCause};
use super::wire;
use super::Engine;
use crate::error::{CorruptionKind, CorruptionLocation, Error, Result};
use crate::storage::log::{Reader, Record};

/// The error for a record at `pos` whose checksum passed but whose content does not decode
/// (or is not the record its reader expected).
pub(crate) fn bad_content(pos: u64) -> Error {
    let location = CorruptionLocation::LogPosition(pos);
    Error::Corruption {
        kind: CorruptionKind::BadContent,
        location,
    }
}

impl Engine {
    /// Reads the record at `pos`, counting the read.
    pub(crate) fn read_record(&self, pos: u64) -> Result<Record> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.log.read(pos)
    }

    /// A reader for many records in a row, such as the entries of a DLQ page.
    pub(crate) fn reader(&self) -> RecordReader<'_> {
        RecordReader {
            engine: self,
            reader: self.log.reader(),
            reads: 0,
        }
    }

    /// Reads the failure history a retry record, or a dead-letter envelope (a dead-letter
    /// record, or the payload record of an imported entry), holds.
    pub(crate) fn read_history(&self, pos: Option<u64>) -> Result<History> {
        let Some(pos) = pos else {
            return Ok(History::default());
        };
        let rec = self.read_record(pos)?;
        let decoded = wire::decode(rec.version(), &rec).map_err(|_| bad_content(pos))?;
        if let Decoded::Op(Op::Retry { history, .. }) = decoded {
            return Ok(history);
        }
        let (failure, first_received_at) = envelope(decoded).ok_or_else(|| bad_content(pos))?;
        Ok(History {
            first_received_at,
            attempts: failure.attempts,
            dropped: failure.attempts_dropped,
        })
    }

    /// The failure in the envelope at `pos`: a dead-letter record, or an imported entry's
    /// payload record.
    pub(crate) fn read_failure(&self, pos: u64) -> Result<FailureInfo> {
        let rec = self.read_record(pos)?;
        let decoded = wire::decode(rec.version(), &rec).ok();
        let envelope = decoded.and_then(envelope).ok_or_else(|| bad_content(pos))?;
        Ok(envelope.0)
    }

    /// When the message whose payload record is at `pos` was first enqueued.
    pub(crate) fn read_enqueued_at(&self, pos: u64) -> Result<u64> {
        let rec = self.read_record(pos)?;
        match wire::decode(rec.version(), &rec) {
            Ok(Decoded::Put(put)) => Ok(put.meta.enqueued_at),
            _ => Err(bad_content(pos)),
        }
    }
}

/// The failure and first delivery time an envelope holds: a dead-letter record, or an
/// imported entry's payload record (`None` for any other record).
fn envelope(decoded: Decoded<'_>) -> Option<(FailureInfo, Option<u64>)> {
    match decoded {
        Decoded::Op(Op::DeadLetter {
            failure,
            first_received_at,
            ..
        }) => Some((failure, first_received_at)),
        Decoded::Put(put) => match put.meta.cause {
            PutCause::Imported(entry) => Some((entry.failure, entry.first_received_at)),
            _ => None,
        },
        _ => None,
    }
}

/// Reads records one after another through the log's [`Reader`] (which keeps the segments
/// and views of the last records read), counting them into the engine's read count when dropped.
pub(crate) struct RecordReader<'a> {
    engine: &'a Engine,
    reader: Reader<'a>,
    reads: u64,
}

impl RecordReader<'_> {
    /// The body of the record at `pos` and the format version it was written in.
    pub(crate) fn read(&mut self, pos: u64) -> Result<(u16, &[u8])> {
        self.reads += 1;
        self.reader.read(pos)
    }
}

impl Drop for RecordReader<'_> {
    fn drop(&mut self) {
        self.engine.reads.fetch_add(self.reads, Ordering::Relaxed);
    }
}

//! Kafka's record batch (magic 2), read and written by qdeck itself rather than by
//! `kafka-protocol`'s codec: that codec keeps a record's headers in a map, so a record that
//! carries one header key twice (Spring Kafka appends `kafka_dlt-exception-*` again each time a
//! record fails anew) would lose one of them through browse and redrive. Kafka's headers are an
//! ordered list, and here they stay one.
//!
//! The layout (Kafka's `DefaultRecordBatch` and `DefaultRecord`): a 61-byte header, then the
//! records, compressed as a whole when the attributes say so. Integers in the header are big
//! endian; in a record, lengths and deltas are zig-zag varints, and −1 is null. The CRC-32C
//! covers everything from the attributes to the batch's end.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::Compression;

/// Bytes before the records.
pub const HEADER_LEN: usize = 61;
const MAGIC: i8 = 2;
const CRC_FROM: usize = 21;

/// One record of a batch, with its absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// In the order written, a key as often as it was written.
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// What the batch header says about all of its records.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub base_offset: i64,
    pub producer_id: i64,
    /// 0 create time, 1 log append time.
    pub timestamp_type: i8,
    pub transactional: bool,
    /// A batch of control records (transaction markers), not of data.
    pub control: bool,
    pub records: Vec<Entry>,
}

/// Why a batch could not be read.
#[derive(Debug, PartialEq)]
pub enum BatchError {
    /// A record format before magic 2 (Kafka before 0.11); read by the older codec instead.
    OldMagic(i8),
    Corrupt(String),
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchError::OldMagic(m) => write!(f, "record format v{m}"),
            BatchError::Corrupt(why) => f.write_str(why),
        }
    }
}

fn corrupt(why: impl Into<String>) -> BatchError {
    BatchError::Corrupt(why.into())
}

/// A cursor over a byte slice that never reads past its end.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BatchError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.buf.len());
        let end = end.ok_or_else(|| corrupt("a record runs past its batch"))?;
        let out = &self.buf[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn i8(&mut self) -> Result<i8, BatchError> {
        Ok(self.take(1)?[0] as i8)
    }

    /// An unsigned LEB128 of at most `max_bytes`, then zig-zag decoded.
    fn zigzag(&mut self, max_bytes: usize) -> Result<i64, BatchError> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let b = self.take(1)?[0];
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        Err(corrupt("a varint longer than its type"))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let v = self.zigzag(5)?;
        i32::try_from(v).map_err(|_| corrupt("a varint out of range"))
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        self.zigzag(10)
    }

    /// A varint length then that many bytes; −1 is null.
    fn nullable(&mut self) -> Result<Option<Bytes>, BatchError> {
        match self.varint()? {
            -1 => Ok(None),
            n => {
                let n = usize::try_from(n).map_err(|_| corrupt("a negative length"))?;
                Ok(Some(Bytes::copy_from_slice(self.take(n)?)))
            }
        }
    }
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

fn compression_of(attributes: i16) -> Result<Compression, BatchError> {
    Ok(match attributes & 0x7 {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        other => return Err(corrupt(format!("unknown compression {other}"))),
    })
}

/// Read one whole batch (`batch` holds exactly it, from its base offset on), inflating its
/// records with `inflate` when they are compressed.
pub fn decode(
    batch: &[u8],
    inflate: impl FnOnce(Bytes, Compression) -> Result<Bytes, String>,
) -> Result<Batch, BatchError> {
    if batch.len() < 17 {
        return Err(corrupt("a batch shorter than its header"));
    }
    let magic = batch[16] as i8;
    if magic != MAGIC {
        return Err(BatchError::OldMagic(magic));
    }
    if batch.len() < HEADER_LEN {
        return Err(corrupt("a batch shorter than its header"));
    }
    let crc = u32::from_be_bytes([batch[17], batch[18], batch[19], batch[20]]);
    if crc32c::crc32c(&batch[CRC_FROM..]) != crc {
        return Err(corrupt("the batch's CRC does not match its bytes"));
    }
    let attributes = i16::from_be_bytes([batch[21], batch[22]]);
    let base_offset = be_i64(batch, 0);
    let (base_ts, max_ts) = (be_i64(batch, 27), be_i64(batch, 35));
    let count = be_i32(batch, 57);
    let log_append = attributes & 0x8 != 0;
    let body = Bytes::copy_from_slice(&batch[HEADER_LEN..]);
    let body = match compression_of(attributes)? {
        Compression::None => body,
        c => inflate(body, c).map_err(corrupt)?,
    };
    let mut r = Reader { buf: &body, at: 0 };
    let mut records = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(4096));
    for _ in 0..count.max(0) {
        let len = usize::try_from(r.varint()?).map_err(|_| corrupt("a negative record size"))?;
        let mut one = Reader {
            buf: r.take(len)?,
            at: 0,
        };
        records.push(entry(
            &mut one,
            base_offset,
            base_ts,
            log_append.then_some(max_ts),
        )?);
    }
    Ok(Batch {
        base_offset,
        producer_id: be_i64(batch, 43),
        timestamp_type: i8::from(log_append),
        transactional: attributes & 0x10 != 0,
        control: attributes & 0x20 != 0,
        records,
    })
}

fn entry(
    r: &mut Reader<'_>,
    base_offset: i64,
    base_ts: i64,
    log_append_ts: Option<i64>,
) -> Result<Entry, BatchError> {
    let _attributes = r.i8()?;
    let ts_delta = r.varlong()?;
    let offset_delta = r.varint()?;
    let key = r.nullable()?;
    let value = r.nullable()?;
    let n = r.varint()?;
    let n = usize::try_from(n).map_err(|_| corrupt("a negative header count"))?;
    let mut headers = Vec::with_capacity(n.min(256));
    for _ in 0..n {
        let name = r
            .nullable()?
            .ok_or_else(|| corrupt("a header without a key"))?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| corrupt("a header key that is not UTF-8"))?;
        headers.push((name, r.nullable()?));
    }
    Ok(Entry {
        offset: base_offset + i64::from(offset_delta),
        timestamp: log_append_ts.unwrap_or(base_ts.wrapping_add(ts_delta)),
        key,
        value,
        headers,
    })
}

/// A record to write.
pub struct Out<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(String, Option<Bytes>)],
}

fn put_zigzag(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

fn put_nullable(buf: &mut BytesMut, v: Option<&[u8]>) {
    match v {
        None => put_zigzag(buf, -1),
        Some(b) => {
            put_zigzag(buf, b.len() as i64);
            buf.put_slice(b);
        }
    }
}

/// One uncompressed batch of `records`, stamped `now` (create time), from no producer
/// (not idempotent, not transactional): what the broker assigns offsets to on Produce.
pub fn encode(records: &[Out<'_>], now: i64) -> Bytes {
    let mut body = BytesMut::new();
    let mut one = BytesMut::new();
    for (i, r) in records.iter().enumerate() {
        one.clear();
        one.put_i8(0);
        put_zigzag(&mut one, 0);
        put_zigzag(&mut one, i as i64);
        put_nullable(&mut one, r.key);
        put_nullable(&mut one, r.value);
        put_zigzag(&mut one, r.headers.len() as i64);
        for (k, v) in r.headers {
            put_nullable(&mut one, Some(k.as_bytes()));
            put_nullable(&mut one, v.as_deref());
        }
        put_zigzag(&mut body, one.len() as i64);
        body.put_slice(&one);
    }
    let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
    let mut b = BytesMut::with_capacity(HEADER_LEN + body.len());
    b.put_i64(0); // base offset: the broker assigns it
    b.put_i32(i32::try_from(HEADER_LEN - 12 + body.len()).unwrap_or(i32::MAX));
    b.put_i32(-1); // partition leader epoch
    b.put_i8(MAGIC);
    b.put_u32(0); // CRC, filled below
    b.put_i16(0); // attributes: no compression, create time, not transactional, not control
    b.put_i32(count.saturating_sub(1)); // last offset delta
    b.put_i64(now);
    b.put_i64(now);
    b.put_i64(-1); // producer id
    b.put_i16(-1); // producer epoch
    b.put_i32(-1); // base sequence
    b.put_i32(count);
    b.put_slice(&body);
    let crc = crc32c::crc32c(&b[CRC_FROM..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn h(k: &str, v: Option<&[u8]>) -> (String, Option<Bytes>) {
        (k.to_string(), v.map(Bytes::copy_from_slice))
    }

    fn no_inflate(_: Bytes, c: Compression) -> Result<Bytes, String> {
        Err(format!("unexpected {c:?}"))
    }

    #[test]
    fn a_repeated_header_key_survives_a_round_trip_in_order() {
        let headers = vec![
            h("kafka_dlt-exception-message", Some(b"first failure")),
            h("trace", None),
            h("kafka_dlt-exception-message", Some(b"second failure")),
            h("empty", Some(b"")),
        ];
        let outs = [
            Out {
                key: Some(b"k-1"),
                value: None,
                headers: &headers,
            },
            Out {
                key: None,
                value: Some(&[0, 0xff, 0x1b]),
                headers: &[],
            },
        ];
        let bytes = encode(&outs, 1_700_000_000_123);
        let b = decode(&bytes, no_inflate).unwrap();
        assert_eq!(b.records.len(), 2);
        assert_eq!(b.records[0].headers, headers);
        assert_eq!(b.records[0].key.as_deref(), Some(&b"k-1"[..]));
        assert_eq!(b.records[0].value, None);
        assert_eq!(b.records[1].key, None);
        assert_eq!(b.records[1].value.as_deref(), Some(&[0, 0xff, 0x1b][..]));
        assert_eq!(b.records[1].offset, 1);
        assert!(b.records.iter().all(|r| r.timestamp == 1_700_000_000_123));
        assert!(!b.control && !b.transactional && b.producer_id == -1);
    }

    /// The batch the codec crate writes reads the same here, and ours reads the same there:
    /// the two agree on the wire, field for field (distinct header keys, the map's limit).
    #[test]
    fn batches_agree_with_the_kafka_protocol_codec_both_ways() {
        let mut map = IndexMap::new();
        map.insert(
            StrBytes::from_static_str("a"),
            Some(Bytes::from_static(b"1")),
        );
        map.insert(StrBytes::from_static_str("nul"), None);
        let theirs: Vec<Record> = (0..3)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i,
                sequence: i32::try_from(i).unwrap() - 1,
                timestamp: 1_000 + i,
                key: (i != 1).then(|| Bytes::from(format!("k{i}"))),
                value: Some(Bytes::from(format!("v{i}"))),
                headers: map.clone(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &theirs, &opts).unwrap();
        let ours = decode(&buf, no_inflate).unwrap();
        assert_eq!(ours.records.len(), 3);
        for (o, t) in ours.records.iter().zip(&theirs) {
            assert_eq!((o.offset, o.timestamp), (t.offset, t.timestamp));
            assert_eq!((&o.key, &o.value), (&t.key, &t.value));
            assert_eq!(o.headers, vec![h("a", Some(b"1")), h("nul", None)]);
        }

        let headers = vec![h("a", Some(b"1")), h("nul", None)];
        let outs: Vec<Out<'_>> = ["x", "y"]
            .iter()
            .map(|v| Out {
                key: None,
                value: Some(v.as_bytes()),
                headers: &headers,
            })
            .collect();
        let mut ours = encode(&outs, 42);
        let set = RecordBatchDecoder::decode(&mut ours).unwrap();
        assert_eq!(set.records.len(), 2);
        assert_eq!(set.records[1].value.as_deref(), Some(&b"y"[..]));
        assert_eq!(set.records[1].offset, 1);
        assert_eq!(set.records[0].timestamp, 42);
        assert_eq!(set.records[0].headers.len(), 2);
    }

    #[test]
    fn a_flipped_byte_a_cut_batch_and_an_old_format_are_refused_not_misread() {
        let headers = vec![h("x", Some(b"y"))];
        let outs = [Out {
            key: Some(b"k"),
            value: Some(b"value"),
            headers: &headers,
        }];
        let good = encode(&outs, 7).to_vec();
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        assert!(matches!(
            decode(&flipped, no_inflate),
            Err(BatchError::Corrupt(_))
        ));
        assert!(decode(&good[..good.len() - 3], no_inflate).is_err());
        let mut old = good.clone();
        old[16] = 1;
        assert_eq!(decode(&old, no_inflate), Err(BatchError::OldMagic(1)));
        // A record that claims more headers than it holds runs past its batch.
        let mut lying = good.clone();
        let n = lying.len() - 5; // the header count sits before "x" and "y" and their lengths
        lying[n] = 0x08;
        let crc = crc32c::crc32c(&lying[CRC_FROM..]);
        lying[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            decode(&lying, no_inflate),
            Err(BatchError::Corrupt(_))
        ));
    }

    #[test]
    fn log_append_time_gives_every_record_the_batchs_max_timestamp() {
        let outs = [Out {
            key: None,
            value: Some(b"v"),
            headers: &[],
        }];
        let mut b = encode(&outs, 5).to_vec();
        b[22] |= 0x08;
        b[35..43].copy_from_slice(&99i64.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_FROM..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let got = decode(&b, no_inflate).unwrap();
        assert_eq!(got.timestamp_type, 1);
        assert_eq!(got.records[0].timestamp, 99);
    }
}

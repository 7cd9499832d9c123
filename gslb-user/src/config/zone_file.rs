//! `[[zone]] file`: a zone's records from an RFC 1035 master file (`$ORIGIN`, `$TTL`,
//! `$INCLUDE`, relative names, `@`, parentheses), as BIND, NSD and Knot read them.
//!
//! The file is parsed by NLnet Labs' `domain` crate (its in-place zone-file parser). Each of
//! its records becomes the same [`RecordData`] a `[[zone.record]]` gives, and is checked with
//! the configuration's own records in `check_records`. Every error names the file and line:
//! the parser's own (syntax) errors carry them; for a record it returns, the line is found by
//! [`entry_starts`], since the parser gives records without positions.

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use domain::base::iana::Class;
use domain::base::name::Name;
use domain::base::rdata::{ComposeRecordData, RecordData as _};
use domain::rdata::ZoneRecordData;
use domain::zonefile::inplace::{Entry, ScannedRecord, Zonefile};

use super::error::ConfigError;
use super::names::{domain_name, in_zone, wildcard_or};
use super::record::{Written, generic};
use super::validate::{Place, Str, TTL_RANGE, Validator};
use crate::model::{RecordData, Soa, StaticRecord};

/// How deep `$INCLUDE`s may nest (NSD's limit is 10; hickory's 256): deeper is surely a
/// mistake, and each level holds a file open in memory.
const MAX_INCLUDE_DEPTH: usize = 8;

/// The largest zone file (or included file) read: a bound on the memory one `file` key can
/// take, far above any zone a GSLB deployment serves (a million records is about 50 MiB).
const MAX_FILE_BYTES: u64 = 512 << 20;

/// A file the configuration was read from besides itself (a zone file, or a file it
/// includes), with its modification time and size taken just before it was read: gslbd
/// reloads when they change, and a write during the read is still seen as a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFile {
    pub path: PathBuf,
    pub stamp: Option<(SystemTime, u64)>,
}

impl InputFile {
    /// `path`'s modification time and size now (`None` when it cannot be read).
    pub fn stamp_of(path: &Path) -> Option<(SystemTime, u64)> {
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.modified().ok()?, meta.len()))
    }
}

/// What a zone file holds, sorted for the zone: its apex SOA and NS records apart.
#[derive(Default)]
pub(super) struct ZoneFile {
    /// The SOA record at the apex, with its TTL and where it was written.
    pub(super) soa: Option<(Soa, u32, Place)>,
    /// The apex NS records: target, TTL and where each was written.
    pub(super) ns: Vec<(String, u32, Place)>,
    /// Every other record, in file order (an included file's where it is included).
    pub(super) records: Vec<Written>,
    /// The files read: the zone file first, then each it includes.
    pub(super) read: Vec<InputFile>,
}

impl Validator<'_> {
    /// Reads zone `apex`'s file, written at `raw` (relative to the configuration's directory).
    pub(super) fn zone_file(
        &self,
        owner: &str,
        apex: &str,
        raw: &Str,
    ) -> Result<ZoneFile, ConfigError> {
        if raw.get_ref().is_empty() {
            return Err(self.error(raw.span(), format!("{owner}: file is empty")));
        }
        let origin = Name::bytes_from_str(apex)
            .map_err(|e| self.error(raw.span(), format!("{owner}: {e}")))?;
        let mut out = ZoneFile::default();
        let mut reading = ZoneFileRead {
            validator: self,
            owner,
            apex,
            out: &mut out,
            open: Vec::new(),
        };
        let top = self.path(raw.get_ref());
        reading.file(&top, origin, None, &Place::Config(raw.span()))?;
        Ok(out)
    }
}

/// One zone file being read, with the files it includes.
struct ZoneFileRead<'v, 'a> {
    validator: &'v Validator<'a>,
    owner: &'v str,
    apex: &'v str,
    out: &'v mut ZoneFile,
    /// The files being read, outermost first: an include of one of them is a loop.
    open: Vec<PathBuf>,
}

impl ZoneFileRead<'_, '_> {
    /// Reads `path` with `origin` as its initial origin and `ttl` (a `$TTL` line) as its
    /// initial default TTL; errors about the file as a whole (unreadable, too big, an include
    /// loop) are at `from`.
    fn file(
        &mut self,
        path: &Path,
        origin: Name<Bytes>,
        ttl: Option<&[u8]>,
        from: &Place,
    ) -> Result<(), ConfigError> {
        let v = self.validator;
        let cannot = |why: String| {
            v.error_at(
                from,
                format!("{}: zone file {}: {why}", self.owner, path.display()),
            )
        };
        if self.open.len() > MAX_INCLUDE_DEPTH {
            return Err(cannot(format!(
                "$INCLUDE nested more than {MAX_INCLUDE_DEPTH} deep"
            )));
        }
        let canonical = std::fs::canonicalize(path).map_err(|e| cannot(e.to_string()))?;
        if self.open.contains(&canonical) {
            return Err(cannot("includes itself ($INCLUDE loop)".into()));
        }
        let stamp = InputFile::stamp_of(path);
        self.out.read.push(InputFile {
            path: path.to_owned(),
            stamp,
        });
        let bytes = read_bounded(path).map_err(cannot)?;
        self.open.push(canonical);

        let shown: Arc<Path> = Arc::from(path);
        let starts = entry_starts(&bytes);
        // The including file's `$TTL`, as the first line of the text parsed.
        let shift = usize::from(ttl.is_some());
        let mut text = ttl.map(|t| [t, b"\n"].concat()).unwrap_or_default();
        text.extend_from_slice(&bytes);
        let mut zone = Zonefile::from(text.as_slice());
        zone.set_origin(origin);
        // The parser refuses a record of another class (RFC 1035 §5.2: one class per file).
        zone.set_default_class(Class::IN);
        let mut entries = 0;
        loop {
            // A panic of the parser (a bug of its own, as domain#573 was) refuses the file
            // instead of ending gslbd: a reload runs this.
            let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| zone.next_entry()));
            let entry = match next {
                Ok(Ok(Some(entry))) => entry,
                Ok(Ok(None)) => break,
                Err(_) => {
                    let line = starts.get(entries).map_or(1, |s| s.line);
                    return Err(ConfigError::Invalid {
                        file: path.to_owned(),
                        line,
                        column: 1,
                        reason: "the zone-file parser failed on this entry (a bug in it)".into(),
                    });
                }
                Ok(Err(e)) => {
                    let at = starts.get(entries).map(|s| s.line);
                    return Err(parse_error(&shown, &e.to_string(), shift, at));
                }
            };
            let Some(start) = starts.get(entries) else {
                // Not reached: `entry_starts` finds every record and $INCLUDE.
                return Err(v.error_at(
                    from,
                    format!(
                        "{}: zone file {}: entry {} not found",
                        self.owner,
                        path.display(),
                        entries + 1
                    ),
                ));
            };
            let line = start.line;
            entries += 1;
            let place = Place::File {
                path: shown.clone(),
                line,
                column: 1,
            };
            match entry {
                Entry::Record(record) => self.record(&record, place)?,
                Entry::Include { path: name, origin } => {
                    let name = name.to_string();
                    // Relative to the including file's directory, as Knot reads it.
                    let included = path
                        .parent()
                        .map_or_else(|| name.clone().into(), |d| d.join(&name));
                    let origin = match origin {
                        Some(o) => o,
                        None => zone.origin().map_err(|e| {
                            v.error_at(&place, format!("{}: $INCLUDE {name}: {e}", self.owner))
                        })?,
                    };
                    // This file's own `$TTL` in force there, else the one it started with.
                    let ttl = start
                        .ttl
                        .clone()
                        .map_or_else(|| ttl.map(<[u8]>::to_vec), |r| Some(bytes[r].to_vec()));
                    self.file(&included, origin, ttl.as_deref(), &place)?;
                }
            }
        }
        self.open.pop();
        Ok(())
    }

    /// Sorts one record of the file into the zone.
    fn record(&mut self, record: &ScannedRecord, place: Place) -> Result<(), ConfigError> {
        let v = self.validator;
        let (owner, apex) = (self.owner, self.apex);
        let name = record.owner().to_string();
        let rtype = record.rtype();
        let err = |reason: String| {
            v.error_at(&place, format!("{owner}, record {name} {rtype}: {reason}"))
        };
        let name = wildcard_or(&name, domain_name).map_err(err)?;
        if !in_zone(&name, apex) {
            return Err(err(format!("{name} is outside the zone {apex}")));
        }
        let ttl = i64::from(record.ttl().as_secs());
        if !TTL_RANGE.contains(&ttl) {
            return Err(err(format!(
                "TTL {ttl} is out of range {}..={} (RFC 2181 §8)",
                TTL_RANGE.start(),
                TTL_RANGE.end()
            )));
        }
        let ttl = ttl as u32;
        let target = |n: &dyn std::fmt::Display, allow_root: bool| -> Result<String, ConfigError> {
            let text = n.to_string();
            match text.trim_end_matches('.') {
                "" if allow_root => Ok(String::new()),
                "" => Err(err("the root is not allowed here".into())),
                t => domain_name(t).map_err(|e| err(format!("{text}: {e}"))),
            }
        };
        let data = match record.data() {
            ZoneRecordData::A(a) => RecordData::A(a.addr()),
            ZoneRecordData::Aaaa(a) => RecordData::Aaaa(a.addr()),
            ZoneRecordData::Cname(c) => RecordData::Cname(target(c.cname(), false)?),
            ZoneRecordData::Ns(n) if name == apex => {
                self.out.ns.push((target(n.nsdname(), false)?, ttl, place));
                return Ok(());
            }
            ZoneRecordData::Ns(n) => RecordData::Ns(target(n.nsdname(), false)?),
            ZoneRecordData::Mx(mx) => RecordData::Mx {
                preference: mx.preference(),
                exchange: target(mx.exchange(), true)?,
            },
            ZoneRecordData::Srv(srv) => RecordData::Srv {
                priority: srv.priority(),
                weight: srv.weight(),
                port: srv.port(),
                target: target(srv.target(), true)?,
            },
            ZoneRecordData::Txt(txt) => {
                let strings: Option<Vec<String>> = txt
                    .iter()
                    .map(|s| std::str::from_utf8(s).ok().map(str::to_owned))
                    .collect();
                match strings {
                    Some(strings) if !strings.is_empty() => RecordData::Txt(strings),
                    // Bytes that are not UTF-8 (`\200`): served as written, in wire form.
                    _ => RecordData::Generic {
                        rtype: 16,
                        rdata: wire(record.data()),
                    },
                }
            }
            ZoneRecordData::Soa(soa) if name == apex => {
                if let Some((_, _, first)) = &self.out.soa {
                    return Err(err(format!(
                        "a second SOA record (the first is on {})",
                        v.cite(first)
                    )));
                }
                let soa = Soa {
                    mname: target(soa.mname(), false)?,
                    rname: target(soa.rname(), false)?,
                    serial: soa.serial().into(),
                    refresh: soa.refresh().as_secs(),
                    retry: soa.retry().as_secs(),
                    expire: soa.expire().as_secs(),
                    minimum: soa.minimum().as_secs(),
                };
                self.out.soa = Some((soa, ttl, place));
                return Ok(());
            }
            ZoneRecordData::Soa(_) => {
                return Err(err(format!("an SOA record belongs at the apex {apex}")));
            }
            other => {
                let code = other.rtype().to_int();
                generic::check_code(code).map_err(err)?;
                RecordData::Generic {
                    rtype: code,
                    rdata: wire(other),
                }
            }
        };
        self.out.records.push(Written {
            record: StaticRecord { name, ttl, data },
            name: place.clone(),
            value: place.clone(),
            ttl: place,
        });
        Ok(())
    }
}

/// The bytes of the regular file `path`, at most [`MAX_FILE_BYTES`]: a FIFO or a device
/// (`$INCLUDE /dev/zero`) would hold the load forever.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file (a directory, a FIFO, a device?)".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {} MiB", MAX_FILE_BYTES >> 20));
    }
    Ok(bytes)
}

/// A record's data in wire form, names uncompressed (RFC 3597 §4).
fn wire(data: &impl ComposeRecordData) -> Vec<u8> {
    let mut out = Vec::new();
    data.compose_rdata(&mut out).expect("a Vec grows");
    out
}

/// The parser's error, its Display `LINE:COLUMN: REASON` with `shift` lines of prelude. The
/// parser notices a bad token once past it, often on the next line: an error inside the
/// entry that starts at line `entry` (or just after it) is put at that line.
fn parse_error(file: &Path, text: &str, shift: usize, entry: Option<usize>) -> ConfigError {
    let mut parts = text.splitn(3, ':');
    let (line, column, reason) = (parts.next(), parts.next(), parts.next());
    let number = |p: Option<&str>| p.and_then(|p| p.trim().parse::<usize>().ok());
    let (line, column, reason) = match (number(line), number(column), reason) {
        (Some(line), Some(column), Some(reason)) => {
            (line.saturating_sub(shift).max(1), column, reason.trim())
        }
        // Not reached: every error of the parser has a position.
        _ => (1, 1, text),
    };
    let (line, column) = match entry {
        Some(start) if start < line => (start, 1),
        _ => (line, column),
    };
    ConfigError::Invalid {
        file: file.to_owned(),
        line,
        column,
        reason: reason.to_owned(),
    }
}

/// Where an entry the parser returns (a record or an `$INCLUDE`) starts.
#[derive(Debug, PartialEq)]
struct EntryStart {
    /// Its first line, 1-based.
    line: usize,
    /// The `$TTL` directive in force there, as written (its bytes up to the line's end): an
    /// included file starts with it, as NSD and Knot read one.
    ttl: Option<Range<usize>>,
}

/// The entries the parser returns (records and `$INCLUDE`s), in order.
///
/// An entry starts at the first token of a line outside parentheses (RFC 1035 §5.1): a
/// blank line, a comment or the rest of a parenthesised record starts none, and `$ORIGIN`
/// and `$TTL` are entries the parser keeps to itself. Only what delimits entries is read:
/// quotes, `\` escapes, `;` comments, parentheses and line ends; the parser reads the rest.
fn entry_starts(text: &[u8]) -> Vec<EntryStart> {
    let mut starts = Vec::new();
    let mut ttl = None;
    let (mut line, mut depth, mut in_entry, mut quoted) = (1, 0usize, false, false);
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if c == b'\n' {
            line += 1;
            if depth == 0 && !quoted {
                in_entry = false;
            }
        } else if quoted {
            match c {
                b'\\' => {
                    if text.get(i + 1) == Some(&b'\n') {
                        line += 1;
                    }
                    i += 1;
                }
                b'"' => quoted = false,
                _ => {}
            }
        } else if c == b';' {
            while i + 1 < text.len() && text[i + 1] != b'\n' {
                i += 1;
            }
        } else if !c.is_ascii_whitespace() {
            if !in_entry {
                in_entry = true;
                let word = text[i..]
                    .split(|b| b.is_ascii_whitespace() || *b == b';')
                    .next()
                    .unwrap_or_default();
                if word.eq_ignore_ascii_case(b"$TTL") {
                    let end = text[i..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(text.len(), |n| i + n);
                    ttl = Some(i..end);
                } else if !word.eq_ignore_ascii_case(b"$ORIGIN") {
                    starts.push(EntryStart {
                        line,
                        ttl: ttl.clone(),
                    });
                }
            }
            match c {
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                b'"' => quoted = true,
                b'\\' => {
                    if text.get(i + 1) == Some(&b'\n') {
                        line += 1;
                    }
                    i += 1;
                }
                _ => {}
            }
        }
        i += 1;
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::entry_starts;

    /// Entries start on the lines a reader of the file would point at: multi-line records
    /// at their first line, owner-less records at theirs, nothing for comments, blank lines
    /// and the directives the parser keeps; each knows the `$TTL` in force.
    #[test]
    fn entries_start_where_they_are_written() {
        let text = "$TTL 300 ; five minutes\n; a comment ( with a parenthesis\n\n@ IN SOA ns1 host (\n 1 2 3 ; (\n 4 5 )\n  IN NS ns1\nns1 A 192.0.2.1 ; x\n$ORIGIN sub.example.com.\nt TXT \"a ; b ( \\\" \"\nm TXT (\"multi\"\n \"line\" )\n$ttl 1h\n$INCLUDE other.zone\nq A 192.0.2.2";
        let starts = entry_starts(text.as_bytes());
        let lines: Vec<usize> = starts.iter().map(|s| s.line).collect();
        assert_eq!(lines, [4, 7, 8, 10, 11, 14, 15]);
        let ttl = |i: usize| starts[i].ttl.clone().map(|r| &text[r]);
        assert_eq!(ttl(0), Some("$TTL 300 ; five minutes"));
        assert_eq!(ttl(5), Some("$ttl 1h"));
    }
}

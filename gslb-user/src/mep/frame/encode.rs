//! Frames encoded, each field held to its cap, and tables split into chunks that fit a frame.

use ipnet::IpNet;

use super::{
    Chunk, FrameError, HEADER_LEN, MAGIC, MAX_BACKUPS, MAX_DETAIL, MAX_NAME, MAX_SITE_NAME,
    MAX_VERSIONS, Message, MessageType, RttRow,
};
use crate::persist::PersistEntry;

/// Encodes `message` as one frame of `version`; `Oversized` when its payload exceeds
/// `max_payload`, `Malformed` when a field breaks its cap (a name too long, too many backups).
pub fn encode(version: u8, message: &Message, max_payload: usize) -> Result<Vec<u8>, FrameError> {
    let kind = message.kind();
    let mut w = Writer {
        buf: Vec::with_capacity(64),
        kind,
    };
    w.buf.extend_from_slice(&MAGIC);
    w.buf.push(version);
    w.buf.push(kind as u8);
    w.buf.extend_from_slice(&[0; 4]);
    match message {
        Message::Hello(h) => {
            if h.versions.is_empty() || h.versions.len() > MAX_VERSIONS {
                return Err(w.bad("version count not in 1..=16"));
            }
            w.buf.push(h.versions.len() as u8);
            w.buf.extend_from_slice(&h.versions);
            w.site(&h.site)?;
            w.site(&h.peer)?;
            w.buf.push(h.role.code());
            w.opt_site(h.parent.as_deref())?;
            w.string(&h.software, MAX_NAME)?;
            match h.rtt_tolerance_ms {
                None => w.buf.push(0),
                Some(t) => {
                    w.buf.push(1);
                    w.buf.extend_from_slice(&t.to_be_bytes());
                }
            }
            w.buf.extend_from_slice(&h.nonce);
            w.buf.extend_from_slice(&h.kx);
        }
        Message::Auth(mac) => w.buf.extend_from_slice(mac),
        Message::Reject { code, detail } => {
            w.buf.push(code.code());
            w.string(truncate(detail, MAX_DETAIL), MAX_DETAIL)?;
        }
        Message::Heartbeat { seq } => w.buf.extend_from_slice(&seq.to_be_bytes()),
        Message::SiteStatus(s) => {
            w.site(&s.site)?;
            w.buf.push(s.role.code());
            w.opt_site(s.parent.as_deref())?;
            w.buf.push(u8::from(s.up));
        }
        Message::ServiceStates(s) => {
            w.site(&s.site)?;
            w.count(s.services.len())?;
            for svc in &s.services {
                w.string(&svc.name, MAX_NAME)?;
                w.buf.push(u8::from(svc.state.up));
                w.buf
                    .extend_from_slice(&svc.state.connections.to_be_bytes());
                w.buf
                    .extend_from_slice(&svc.state.bandwidth.bps().to_be_bytes());
            }
        }
        Message::RttRows(c) => {
            w.buf.push(u8::from(c.first));
            w.buf.push(u8::from(c.last));
            w.count(c.items.len())?;
            for row in &c.items {
                w.prefix(&row.ldns);
                w.site(&row.site)?;
                w.buf.extend_from_slice(&row.rtt_us.to_be_bytes());
                w.buf.push(row.protocol.code());
                w.buf.extend_from_slice(&row.age_s.to_be_bytes());
            }
        }
        Message::Persistence(c) => {
            w.buf.push(u8::from(c.first));
            w.buf.push(u8::from(c.last));
            w.count(c.items.len())?;
            for e in &c.items {
                w.prefix(&e.client);
                w.string(&e.domain, MAX_NAME)?;
                w.string(&e.service, MAX_NAME)?;
                w.buf.extend_from_slice(&e.ttl_s.to_be_bytes());
            }
        }
        Message::BackupParents { parent, backups } => {
            w.site(parent)?;
            w.backups(backups)?;
        }
        Message::AdoptRequest {
            original_parent,
            backups,
        } => {
            w.site(original_parent)?;
            w.backups(backups)?;
        }
        Message::AdoptAccept { original_parent } => w.site(original_parent)?,
        Message::AdoptReject {
            original_parent,
            reason,
        } => {
            w.site(original_parent)?;
            w.string(truncate(reason, MAX_DETAIL), MAX_DETAIL)?;
        }
    }
    let len = w.buf.len() - HEADER_LEN;
    if len > max_payload {
        return Err(FrameError::Oversized {
            len,
            max: max_payload,
        });
    }
    w.buf[4..8].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(w.buf)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

struct Writer {
    buf: Vec<u8>,
    kind: MessageType,
}

impl Writer {
    fn bad(&self, what: &'static str) -> FrameError {
        FrameError::Malformed {
            kind: self.kind,
            what,
        }
    }

    fn string(&mut self, s: &str, max: usize) -> Result<(), FrameError> {
        if s.len() > max {
            return Err(self.bad("string longer than its cap"));
        }
        self.buf.extend_from_slice(&(s.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn site(&mut self, s: &str) -> Result<(), FrameError> {
        if s.is_empty() {
            return Err(self.bad("empty site name"));
        }
        self.string(s, MAX_SITE_NAME)
    }

    fn opt_site(&mut self, s: Option<&str>) -> Result<(), FrameError> {
        match s {
            None => {
                self.buf.push(0);
                Ok(())
            }
            Some(s) => {
                self.buf.push(1);
                self.site(s)
            }
        }
    }

    fn count(&mut self, n: usize) -> Result<(), FrameError> {
        let n = u32::try_from(n).map_err(|_| self.bad("too many items"))?;
        self.buf.extend_from_slice(&n.to_be_bytes());
        Ok(())
    }

    fn backups(&mut self, list: &[String]) -> Result<(), FrameError> {
        if list.len() > MAX_BACKUPS {
            return Err(self.bad("more than 5 backup parents"));
        }
        self.buf.push(list.len() as u8);
        for s in list {
            self.site(s)?;
        }
        Ok(())
    }

    fn prefix(&mut self, net: &IpNet) {
        match net {
            IpNet::V4(n) => {
                self.buf.push(4);
                self.buf.push(n.prefix_len());
                self.buf.extend_from_slice(&n.addr().octets());
            }
            IpNet::V6(n) => {
                self.buf.push(6);
                self.buf.push(n.prefix_len());
                self.buf.extend_from_slice(&n.addr().octets());
            }
        }
    }
}

/// Encoded size of one RTT row (to split tables into frames under the cap).
pub fn rtt_row_len(row: &RttRow) -> usize {
    prefix_len(&row.ldns) + 2 + row.site.len() + 4 + 1 + 4
}

/// Encoded size of one persistence entry.
pub fn persist_entry_len(e: &PersistEntry) -> usize {
    prefix_len(&e.client) + 2 + e.domain.len() + 2 + e.service.len() + 4
}

fn prefix_len(net: &IpNet) -> usize {
    match net {
        IpNet::V4(_) => 6,
        IpNet::V6(_) => 18,
    }
}

/// Splits `items` into chunks whose frames stay under `max_payload` (room is left for the
/// chunk's own fields). An empty table is one empty chunk, so that the receiver clears its copy.
pub fn chunks<T: Clone>(
    items: &[T],
    max_payload: usize,
    len: impl Fn(&T) -> usize,
) -> Vec<Chunk<T>> {
    let budget = max_payload.saturating_sub(6).max(1);
    let mut out: Vec<Chunk<T>> = Vec::new();
    let mut current = Vec::new();
    let mut size = 0;
    for item in items {
        let l = len(item);
        if !current.is_empty() && size + l > budget {
            out.push(Chunk {
                first: out.is_empty(),
                last: false,
                items: std::mem::take(&mut current),
            });
            size = 0;
        }
        size += l;
        current.push(item.clone());
    }
    out.push(Chunk {
        first: out.is_empty(),
        last: true,
        items: current,
    });
    out
}

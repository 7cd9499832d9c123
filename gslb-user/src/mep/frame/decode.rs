//! Frames decoded: the header checked against the cap first, then the payload field by field,
//! every count checked against the bytes left.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::{
    Chunk, FrameError, HEADER_LEN, Header, Hello, MAGIC, MAX_BACKUPS, MAX_DETAIL, MAX_NAME,
    MAX_SITE_NAME, MAX_VERSIONS, Message, MessageType, RejectCode, Role, RttProtocol, RttRow,
    ServiceReport, ServiceStates, SiteStatus,
};
use crate::health::state::{Bandwidth, ServiceState};
use crate::persist::PersistEntry;

/// Decodes a header, checking the magic, the type and the length cap.
pub fn decode_header(bytes: &[u8], max_payload: usize) -> Result<Header, FrameError> {
    if bytes.len() < HEADER_LEN {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN,
            have: bytes.len(),
        });
    }
    if bytes[..2] != MAGIC {
        return Err(FrameError::BadMagic([bytes[0], bytes[1]]));
    }
    let version = bytes[2];
    let kind = MessageType::from_code(bytes[3]).ok_or(FrameError::UnknownType(bytes[3]))?;
    let len = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if len > max_payload {
        return Err(FrameError::Oversized {
            len,
            max: max_payload,
        });
    }
    Ok(Header { version, kind, len })
}

/// Decodes one whole frame at the start of `bytes`: the frame's version, its message and the
/// bytes it took.
pub fn decode_frame(bytes: &[u8], max_payload: usize) -> Result<(u8, Message, usize), FrameError> {
    let header = decode_header(bytes, max_payload)?;
    let end = HEADER_LEN + header.len;
    if bytes.len() < end {
        return Err(FrameError::Truncated {
            needed: end,
            have: bytes.len(),
        });
    }
    let message = decode_payload(header.kind, &bytes[HEADER_LEN..end])?;
    Ok((header.version, message, end))
}

/// Decodes the payload of a frame of type `kind`.
pub fn decode_payload(kind: MessageType, payload: &[u8]) -> Result<Message, FrameError> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
        kind,
    };
    let message = match kind {
        MessageType::Hello => {
            let n = r.u8()? as usize;
            if n == 0 || n > MAX_VERSIONS {
                return Err(r.bad("version count not in 1..=16"));
            }
            let versions = r.take(n)?.to_vec();
            Message::Hello(Hello {
                versions,
                site: r.site()?,
                peer: r.site()?,
                role: r.role()?,
                parent: r.opt(Reader::site)?,
                software: r.string(MAX_NAME)?,
                rtt_tolerance_ms: r.opt(Reader::u32)?,
                nonce: r.array()?,
                kx: r.array()?,
            })
        }
        MessageType::Auth => Message::Auth(r.array()?),
        MessageType::Reject => Message::Reject {
            code: RejectCode::from_code(r.u8()?),
            detail: r.string(MAX_DETAIL)?,
        },
        MessageType::Heartbeat => Message::Heartbeat { seq: r.u64()? },
        MessageType::SiteStatus => Message::SiteStatus(SiteStatus {
            site: r.site()?,
            role: r.role()?,
            parent: r.opt(Reader::site)?,
            up: r.bool()?,
        }),
        MessageType::ServiceStates => {
            let site = r.site()?;
            // name length (2) + up (1) + connections (8) + bandwidth (8)
            let services = r.list(19, |r| {
                Ok(ServiceReport {
                    name: r.string(MAX_NAME)?,
                    state: ServiceState {
                        up: r.bool()?,
                        connections: r.u64()?,
                        bandwidth: Bandwidth::from_bps(r.u64()?),
                    },
                })
            })?;
            Message::ServiceStates(ServiceStates { site, services })
        }
        MessageType::RttRows => {
            let (first, last) = (r.bool()?, r.bool()?);
            // prefix (6) + site length (2) + rtt (4) + protocol (1) + age (4)
            let items = r.list(17, |r| {
                Ok(RttRow {
                    ldns: r.prefix()?,
                    site: r.site()?,
                    rtt_us: r.u32()?,
                    protocol: RttProtocol::from_code(r.u8()?)
                        .ok_or(r.bad("unknown RTT protocol"))?,
                    age_s: r.u32()?,
                })
            })?;
            Message::RttRows(Chunk { first, last, items })
        }
        MessageType::Persistence => {
            let (first, last) = (r.bool()?, r.bool()?);
            // prefix (6) + two name lengths (4) + ttl (4)
            let items = r.list(14, |r| {
                Ok(PersistEntry {
                    client: r.prefix()?,
                    domain: r.string(MAX_NAME)?,
                    service: r.string(MAX_NAME)?,
                    ttl_s: r.u32()?,
                })
            })?;
            Message::Persistence(Chunk { first, last, items })
        }
        MessageType::BackupParents => Message::BackupParents {
            parent: r.site()?,
            backups: r.backups()?,
        },
        MessageType::AdoptRequest => Message::AdoptRequest {
            original_parent: r.site()?,
            backups: r.backups()?,
        },
        MessageType::AdoptAccept => Message::AdoptAccept {
            original_parent: r.site()?,
        },
        MessageType::AdoptReject => Message::AdoptReject {
            original_parent: r.site()?,
            reason: r.string(MAX_DETAIL)?,
        },
    };
    let extra = r.buf.len() - r.pos;
    if extra != 0 {
        return Err(FrameError::TrailingBytes { kind, extra });
    }
    Ok(message)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    kind: MessageType,
}

impl<'a> Reader<'a> {
    fn bad(&self, what: &'static str) -> FrameError {
        FrameError::Malformed {
            kind: self.kind,
            what,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(FrameError::Truncated {
                needed: HEADER_LEN + self.pos + n,
                have: HEADER_LEN + self.buf.len(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn bool(&mut self) -> Result<bool, FrameError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.bad("bool not 0 or 1")),
        }
    }

    fn role(&mut self) -> Result<Role, FrameError> {
        Role::from_code(self.u8()?).ok_or(self.bad("unknown role"))
    }

    fn string(&mut self, max: usize) -> Result<String, FrameError> {
        let len = self.u16()? as usize;
        if len > max {
            return Err(self.bad("string longer than its cap"));
        }
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| self.bad("string not UTF-8"))
    }

    fn site(&mut self) -> Result<String, FrameError> {
        let s = self.string(MAX_SITE_NAME)?;
        if s.is_empty() {
            return Err(self.bad("empty site name"));
        }
        Ok(s)
    }

    fn opt<T>(
        &mut self,
        f: fn(&mut Self) -> Result<T, FrameError>,
    ) -> Result<Option<T>, FrameError> {
        if self.bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A u32 count of items of at least `min_size` bytes each, checked against the bytes left
    /// before anything is allocated.
    fn list<T>(
        &mut self,
        min_size: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, FrameError>,
    ) -> Result<Vec<T>, FrameError> {
        let n = self.u32()? as usize;
        let left = self.buf.len() - self.pos;
        if n.saturating_mul(min_size) > left {
            return Err(self.bad("item count larger than the payload can hold"));
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(item(self)?);
        }
        Ok(items)
    }

    fn backups(&mut self) -> Result<Vec<String>, FrameError> {
        let n = self.u8()? as usize;
        if n > MAX_BACKUPS {
            return Err(self.bad("more than 5 backup parents"));
        }
        (0..n).map(|_| self.site()).collect()
    }

    fn prefix(&mut self) -> Result<IpNet, FrameError> {
        let family = self.u8()?;
        let len = self.u8()?;
        let addr: IpAddr = match family {
            4 => Ipv4Addr::from(self.array::<4>()?).into(),
            6 => Ipv6Addr::from(self.array::<16>()?).into(),
            _ => return Err(self.bad("unknown address family")),
        };
        IpNet::new(addr, len).map_err(|_| self.bad("prefix length too long"))
    }
}

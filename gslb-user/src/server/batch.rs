//! Batched datagram I/O for the UDP loops: up to [`BATCH`] queries taken with one
//! `recvmmsg(2)` and their answers sent with one `sendmmsg(2)`, from buffers the loop keeps (no
//! allocation per query). Under load a socket holds many queries at once, and one system call
//! per datagram each way was a large part of what a query cost (issue 15's loopback profile:
//! sendto, recvfrom and epoll_wait held 62% of gslbd's samples). Both calls are non-blocking;
//! the loop waits on tokio's readiness.

use std::{
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    os::fd::RawFd,
};

/// Datagrams taken (and answered) per system call.
pub(super) const BATCH: usize = 32;
/// A receive slot holds the largest datagram (a longer one would be cut short and misread).
const SLOT: usize = u16::MAX as usize;

/// One loop's buffers: the queries of the last receive, with their sources, and the answers
/// queued for them.
pub(super) struct Batch {
    /// `BATCH` receive slots of `SLOT` bytes (pages are only touched as far as datagrams
    /// reach).
    slots: Box<[u8]>,
    /// Each slot's datagram length and source.
    lens: [usize; BATCH],
    sources: Box<[libc::sockaddr_storage; BATCH]>,
    source_lens: [libc::socklen_t; BATCH],
    /// Answers by slot, reused from batch to batch.
    replies: Vec<Vec<u8>>,
    /// The slots whose answer is queued, in order; `sent` of them are out.
    queued: Vec<usize>,
    sent: usize,
}

impl Batch {
    pub(super) fn new() -> Self {
        Batch {
            slots: vec![0u8; BATCH * SLOT].into_boxed_slice(),
            lens: [0; BATCH],
            // SAFETY: all-zero bytes are a valid sockaddr_storage (AF_UNSPEC).
            sources: Box::new(unsafe { std::mem::zeroed() }),
            source_lens: [0; BATCH],
            replies: (0..BATCH).map(|_| Vec::with_capacity(512)).collect(),
            queued: Vec::with_capacity(BATCH),
            sent: 0,
        }
    }

    /// Takes the datagrams waiting on `fd` (at most [`BATCH`]) without blocking: how many
    /// (`WouldBlock` when none). Answers still queued are dropped.
    pub(super) fn receive(&mut self, fd: RawFd) -> io::Result<usize> {
        self.queued.clear();
        self.sent = 0;
        // SAFETY: zeroed iovec and mmsghdr are valid (null pointers, zero lengths).
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, (v, h)) in iov.iter_mut().zip(hdrs.iter_mut()).enumerate() {
            v.iov_base = self.slots[i * SLOT..].as_mut_ptr().cast();
            v.iov_len = SLOT;
            h.msg_hdr.msg_name = (&raw mut self.sources[i]).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: every header points at a slot, a source and an iovec that outlive the call.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        for (i, h) in hdrs[..n].iter().enumerate() {
            self.lens[i] = h.msg_len as usize;
            self.source_lens[i] = h.msg_hdr.msg_namelen;
        }
        Ok(n)
    }

    /// Slot `i`: its datagram, its source address (`None`: not an IP source) and its answer
    /// buffer, to fill and then [`Batch::queue`].
    pub(super) fn slot(&mut self, i: usize) -> (&[u8], Option<IpAddr>, &mut Vec<u8>) {
        let bytes = &self.slots[i * SLOT..i * SLOT + self.lens[i]];
        (bytes, source_ip(&self.sources[i]), &mut self.replies[i])
    }

    /// Sends slot `i`'s answer back to its source with the next [`Batch::send`].
    pub(super) fn queue(&mut self, i: usize) {
        self.queued.push(i);
    }

    /// Whether answers are still to be sent.
    pub(super) fn pending(&self) -> bool {
        self.sent < self.queued.len()
    }

    /// Sends the queued answers not sent yet, as many as the socket takes now: `WouldBlock`
    /// when it takes none (then wait until it is writable); another error is the first
    /// pending answer's, which is dropped so that the others still go.
    pub(super) fn send(&mut self, fd: RawFd) -> io::Result<usize> {
        let pending = &self.queued[self.sent..];
        // SAFETY: as in `receive`.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for ((&slot, v), h) in pending.iter().zip(iov.iter_mut()).zip(hdrs.iter_mut()) {
            let reply = &self.replies[slot];
            v.iov_base = reply.as_ptr().cast_mut().cast();
            v.iov_len = reply.len();
            h.msg_hdr.msg_name = (&raw mut self.sources[slot]).cast();
            h.msg_hdr.msg_namelen = self.source_lens[slot];
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: every header points at an answer, a source and an iovec that outlive the
        // call; the kernel only reads them.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                hdrs.as_mut_ptr(),
                pending.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::WouldBlock {
                self.sent += 1;
            }
            return Err(error);
        }
        self.sent += n as usize;
        Ok(n as usize)
    }
}

/// The IP address of a socket address the kernel filled in.
fn source_ip(addr: &libc::sockaddr_storage) -> Option<IpAddr> {
    match i32::from(addr.ss_family) {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in for AF_INET.
            let sin = unsafe { &*std::ptr::from_ref(addr).cast::<libc::sockaddr_in>() };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))))
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6 for AF_INET6.
            let sin6 = unsafe { &*std::ptr::from_ref(addr).cast::<libc::sockaddr_in6>() };
            Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

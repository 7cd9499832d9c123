//! Batched datagram I/O for the UDP loops: up to [`BATCH`] queries taken with one
//! `recvmmsg(2)` and their answers sent with one `sendmmsg(2)`, from buffers the loop keeps (no
//! allocation per query). Under load a socket holds many queries at once, and one system call
//! per datagram each way was a large part of what a query cost (issue 15's loopback profile:
//! sendto, recvfrom and epoll_wait held 62% of gslbd's samples). Both calls are non-blocking;
//! the loop waits in `poll(2)` (`server::udp`).

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
    slots: Vec<u8>,
    /// Each slot's datagram length and source.
    lens: [usize; BATCH],
    sources: Vec<libc::sockaddr_storage>,
    source_lens: [libc::socklen_t; BATCH],
    /// Answers by slot, reused from batch to batch.
    replies: Vec<Vec<u8>>,
    /// The slots whose answer is queued, in order; `sent` of them are out.
    queued: Vec<usize>,
    sent: usize,
    /// `recvmmsg`'s headers, each pointing at its slot and source, set once here: a receive
    /// only resets what the kernel wrote back (the source lengths). Under load a receive often
    /// takes a few datagrams, and building all `BATCH` headers anew each time cost more
    /// than that. On the heap, as everything they point at, so that moving the `Batch` moves
    /// none; in `Vec`s (`BATCH` long, never resized), whose pointers stay valid beside
    /// references to their elements, which a `Box`'s do not.
    recv_iov: Vec<libc::iovec>,
    recv_hdrs: Vec<libc::mmsghdr>,
    /// `sendmmsg`'s, filled for the pending answers only.
    send_iov: Vec<libc::iovec>,
    send_hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in the headers point only into the batch's own heap allocations
// (`slots`, `sources`, the iovec arrays), which move with it and are used by one thread at a
// time, as every other field.
unsafe impl Send for Batch {}

impl Batch {
    pub(super) fn new() -> Self {
        fn zeroed<T>() -> Vec<T> {
            // SAFETY: only used for sockaddr_storage (all-zero: AF_UNSPEC), iovec and mmsghdr
            // (null pointers, zero lengths), for which all-zero bytes are valid.
            (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect()
        }
        let mut batch = Batch {
            slots: vec![0u8; BATCH * SLOT],
            lens: [0; BATCH],
            sources: zeroed(),
            source_lens: [0; BATCH],
            replies: (0..BATCH).map(|_| Vec::with_capacity(512)).collect(),
            queued: Vec::with_capacity(BATCH),
            sent: 0,
            recv_iov: zeroed(),
            recv_hdrs: zeroed(),
            send_iov: zeroed(),
            send_hdrs: zeroed(),
        };
        let (slots, sources) = (batch.slots.as_mut_ptr(), batch.sources.as_mut_ptr());
        let (recv_iov, send_iov) = (batch.recv_iov.as_mut_ptr(), batch.send_iov.as_mut_ptr());
        for i in 0..BATCH {
            // SAFETY: `i` < BATCH, within every vector (slots: BATCH * SLOT bytes).
            let (slot, source, recv_v, send_v) = unsafe {
                (
                    slots.add(i * SLOT),
                    sources.add(i),
                    recv_iov.add(i),
                    send_iov.add(i),
                )
            };
            // Through the pointers the headers keep, not references to the elements (which
            // would end those pointers' validity in Rust's aliasing model).
            // SAFETY: in bounds, as above.
            unsafe {
                (*recv_v).iov_base = slot.cast();
                (*recv_v).iov_len = SLOT;
            }
            let h = &mut batch.recv_hdrs[i].msg_hdr;
            h.msg_name = source.cast();
            h.msg_iov = recv_v;
            h.msg_iovlen = 1;
            let h = &mut batch.send_hdrs[i].msg_hdr;
            h.msg_iov = send_v;
            h.msg_iovlen = 1;
        }
        batch
    }

    /// Takes the datagrams waiting on `fd` (at most [`BATCH`]) without blocking: how many
    /// (`WouldBlock` when none). Answers still queued are dropped.
    pub(super) fn receive(&mut self, fd: RawFd) -> io::Result<usize> {
        self.queued.clear();
        self.sent = 0;
        // The kernel wrote the lengths of the last sources over the room there is.
        for h in &mut self.recv_hdrs {
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        }
        // SAFETY: every header points at its slot, source and iovec, which live as long as
        // the batch (`new`).
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.recv_hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        for (i, h) in self.recv_hdrs[..n].iter().enumerate() {
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
        for (k, &slot) in pending.iter().enumerate() {
            // An answer's buffer may have grown (or been replaced) since the last batch.
            let reply = &self.replies[slot];
            // SAFETY: `k` and `slot` < BATCH; the iovec through the pointer its header keeps
            // (as in `new`).
            unsafe {
                let v = self.send_iov.as_mut_ptr().add(k);
                (*v).iov_base = reply.as_ptr().cast_mut().cast();
                (*v).iov_len = reply.len();
            }
            let h = &mut self.send_hdrs[k].msg_hdr;
            // SAFETY: `slot` < BATCH.
            h.msg_name = unsafe { self.sources.as_mut_ptr().add(slot) }.cast();
            h.msg_namelen = self.source_lens[slot];
        }
        // SAFETY: the first `pending.len()` headers point at their iovec (`new`), and these at
        // an answer and a source that outlive the call; the kernel only reads them.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                self.send_hdrs.as_mut_ptr(),
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

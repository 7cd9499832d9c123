//! The MAC of an interface, as the program compares it (`LocalMacs`): the fast path answers
//! only frames sent to the MAC of an interface it is attached to, and its reply leaves from it.

use std::io;

/// The hardware address of `interface` in this process's network namespace (SIOCGIFHWADDR:
/// sysfs would show the namespace it was mounted in).
pub fn interface_mac(interface: &str) -> io::Result<[u8; 6]> {
    let name = interface.as_bytes();
    // SAFETY: a zeroed ifreq is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty() || name.len() >= req.ifr_name.len() || name.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an interface name",
        ));
    }
    for (to, from) in req.ifr_name.iter_mut().zip(name) {
        *to = *from as libc::c_char;
    }
    // SAFETY: plain socket call; the fd is closed by OwnedFd.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: SIOCGIFHWADDR fills the ifreq it is given.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            libc::SIOCGIFHWADDR,
            &mut req,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFHWADDR set the hwaddr member of the union.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    Ok(std::array::from_fn(|i| data[i] as u8))
}

/// A MAC as `LocalMacs` stores it: its six bytes as the low bytes of a little-endian word, i.e.
/// the first word of a frame sent to it, masked to six bytes.
pub fn mac_word(mac: [u8; 6]) -> u64 {
    let mut word = [0u8; 8];
    word[..6].copy_from_slice(&mac);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_the_zero_mac_and_a_missing_interface_is_an_error() {
        assert_eq!(interface_mac("lo").unwrap(), [0; 6]);
        assert!(interface_mac("no-such-if0").is_err());
        assert!(interface_mac("").is_err());
    }

    #[test]
    fn the_word_is_the_frame_start() {
        let mac = [0x02, 0, 0, 0, 0, 0x02];
        let frame = [0x02, 0, 0, 0, 0, 0x02, 0xaa, 0xbb];
        assert_eq!(mac_word(mac), u64::from_le_bytes(frame) & 0xffff_ffff_ffff);
    }
}

//! The clients asked: seeded, most inside or at the edges of a configured range.

use super::*;

pub(super) const V4_FIRST: u128 = 0xffff << 32;
pub(super) const V4_LAST: u128 = V4_FIRST | 0xffff_ffff;

pub(super) fn addr_of(key: u128) -> IpAddr {
    if (V4_FIRST..=V4_LAST).contains(&key) {
        IpAddr::V4(Ipv4Addr::from(key as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(key))
    }
}

/// Every range of the world that has a boundary: static view prefixes, policy subnets, topology
/// prefixes, location ranges and RTT rows, as (first, last) keys.
pub(super) fn ranges(world: &World) -> Vec<(u128, u128)> {
    let mut nets: Vec<IpNet> = Vec::new();
    for v in &world.config.views {
        nets.extend(&v.prefixes);
    }
    for p in &world.config.policies {
        p.expression.subnets(&mut nets);
    }
    for r in &world.config.topology {
        if let Ldns::Prefix(net) = &r.ldns {
            nets.push(*net);
        }
    }
    nets.extend(world.rtt.iter().map(|r| r.ldns));
    let mut out: Vec<(u128, u128)> = nets
        .iter()
        .map(|n| (key_of(n.network()), key_of(n.broadcast())))
        .collect();
    let mut add = |from: IpAddr, to: IpAddr| out.push((key_of(from), key_of(to)));
    for line in CSV.lines() {
        let mut fields = line.split(',');
        let from = fields.next().unwrap().parse().unwrap();
        let to = fields.next().unwrap().parse().unwrap();
        add(from, to);
    }
    for (_, from, to, _) in &world.config.locations.custom {
        add(*from, *to);
    }
    out
}

/// `n` client addresses from a seeded generator: 45% inside a range of the world, 30% at one
/// of its edges (just inside or just outside), the rest anywhere in IPv4 or IPv6 (2001:db8::/32
/// or anywhere). No IPv4-mapped IPv6 address: those are IPv4 clients.
pub(super) fn clients(world: &World, seed: u8, n: usize) -> Vec<IpAddr> {
    let ranges = ranges(world);
    let mut rng = TestRng::from_seed(RngAlgorithm::XorShift, &[seed; 16]);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.next_u32() % 100;
        let (first, last) = ranges[rng.next_u32() as usize % ranges.len()];
        let v4 = (V4_FIRST..=V4_LAST).contains(&first);
        let random128 =
            |rng: &mut TestRng| u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
        let key = match r {
            // Inside a range.
            0..45 => {
                let span = last - first;
                first
                    + if span == u128::MAX {
                        random128(&mut rng)
                    } else {
                        random128(&mut rng) % (span + 1)
                    }
            }
            // At an edge, just inside or just outside.
            45..75 => {
                let offset = u128::from(rng.next_u32() % 3);
                match rng.next_u32() % 4 {
                    0 => first.wrapping_add(offset),
                    1 => first.wrapping_sub(offset + 1),
                    2 => last.wrapping_sub(offset),
                    _ => last.wrapping_add(offset + 1),
                }
            }
            75..85 => V4_FIRST | u128::from(rng.next_u32()),
            85..93 => (0x2001_0db8u128 << 96) | (random128(&mut rng) >> 32),
            _ => random128(&mut rng),
        };
        // An edge step may leave the range's family; keep the address in it.
        if (45..75).contains(&r) && (V4_FIRST..=V4_LAST).contains(&key) != v4 {
            continue;
        }
        // A key in the IPv4-mapped range is an IPv4 client, never an IPv6 one.
        out.push(addr_of(key));
    }
    out
}

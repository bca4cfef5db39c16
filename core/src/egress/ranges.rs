//! Which IP addresses outbound requests may reach. Special-purpose ranges are refused unless
//! the operator named them (`--egress-allow-private`), which is how tests reach loopback fakes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Why an address is not reachable, or None when it is a public unicast address.
pub fn blocked_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let reason = match o {
        [0, ..] => "this-network address",
        [10, ..] => "private address",
        [100, b, ..] if (64..128).contains(&b) => "carrier-grade NAT address",
        [127, ..] => "loopback address",
        [169, 254, ..] => "link-local or cloud metadata address",
        [172, b, ..] if (16..32).contains(&b) => "private address",
        [192, 0, 0, _] => "IETF protocol assignment",
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => "documentation address",
        [192, 88, 99, _] => "6to4 relay address",
        [192, 168, ..] => "private address",
        [198, b, ..] if b == 18 || b == 19 => "benchmarking address",
        [a, ..] if (224..240).contains(&a) => "multicast address",
        [a, ..] if a >= 240 => "reserved or broadcast address",
        _ => return None,
    };
    Some(reason)
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_reason(v4);
    }
    let s = ip.segments();
    let reason = match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => "unspecified address",
        [0, 0, 0, 0, 0, 0, 0, 1] => "loopback address",
        // ::a.b.c.d (deprecated IPv4-compatible) and other addresses in ::/96.
        [0, 0, 0, 0, 0, 0, _, _] => "IPv4-compatible address",
        [0x64, 0xff9b, ..] => "NAT64 address",
        [0x100, 0, 0, 0, ..] => "discard-only address",
        [0x2001, 0, ..] => "Teredo address",
        [0x2001, 0xdb8, ..] => "documentation address",
        [0x2002, ..] => "6to4 address",
        [a, ..] if (a & 0xfe00) == 0xfc00 => "unique local address",
        [a, ..] if (a & 0xffc0) == 0xfe80 => "link-local address",
        [a, ..] if (a & 0xffc0) == 0xfec0 => "site-local address",
        [a, ..] if (a & 0xff00) == 0xff00 => "multicast address",
        _ => return None,
    };
    Some(reason)
}

/// An address or CIDR block the operator allows despite its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrRange {
    addr: IpAddr,
    prefix: u8,
}

impl FromStr for AddrRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, p) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or CIDR block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("bad prefix length in {s:?}"))?,
            None => max,
        };
        Ok(AddrRange { addr, prefix })
    }
}

impl AddrRange {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.prefix)
                };
                (u32::from(a) & mask) == (u32::from(b) & mask)
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.prefix)
                };
                (u128::from(a) & mask) == (u128::from(b) & mask)
            }
            _ => false,
        }
    }
}

/// The operator's exceptions to the blocked ranges (empty by default).
#[derive(Debug, Clone, Default)]
pub struct PrivateAllowance(pub Vec<AddrRange>);

impl PrivateAllowance {
    /// None when `ip` may be dialled; otherwise why not.
    pub fn check(&self, ip: IpAddr) -> Option<&'static str> {
        let reason = blocked_reason(ip)?;
        let canonical = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        if self
            .0
            .iter()
            .any(|r| r.contains(ip) || r.contains(canonical))
        {
            None
        } else {
            Some(reason)
        }
    }

    /// `check` for a URL whose host is an IP literal; a name is None here (the checked
    /// resolver refuses it when it resolves to a blocked address).
    pub fn check_url_host(&self, url: &url::Url) -> Option<&'static str> {
        match url.host()? {
            url::Host::Ipv4(v4) => self.check(IpAddr::V4(v4)),
            url::Host::Ipv6(v6) => self.check(IpAddr::V6(v6)),
            url::Host::Domain(_) => None,
        }
    }

    /// Checks a URL an admin registers for outbound calls (an MCP server, a webhook): it parses,
    /// is `http(s)` with a host (`what` says what it must be), carries no credentials, and an IP
    /// literal is not refused; names are checked again by the resolver at every connection.
    pub fn check_registered_url(&self, raw: &str, what: &str) -> crate::Result<url::Url> {
        let url = url::Url::parse(raw).map_err(|e| crate::Error::invalid(format!("url: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(crate::Error::invalid(format!("url must be {what}")));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(crate::Error::invalid("credentials are secret refs, never inline; remove the user and password from the url"));
        }
        if let Some(reason) = self.check_url_host(&url) {
            return Err(crate::Error::invalid(format!(
                "url points at a {reason}; an operator can allow it with --egress-allow-private"
            )));
        }
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(s: &str) -> bool {
        blocked_reason(s.parse().unwrap()).is_some()
    }

    #[test]
    fn special_ranges_are_blocked_and_public_ones_are_not() {
        for ip in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "198.18.0.1",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        ] {
            assert!(blocked(ip), "{ip} must be blocked");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!blocked(ip), "{ip} must be allowed");
        }
    }

    #[test]
    fn the_operator_can_allow_named_private_addresses() {
        let allow = PrivateAllowance(vec![
            "127.0.0.1".parse().unwrap(),
            "10.0.0.0/8".parse().unwrap(),
        ]);
        assert_eq!(allow.check("127.0.0.1".parse().unwrap()), None);
        assert_eq!(allow.check("::ffff:127.0.0.1".parse().unwrap()), None);
        assert_eq!(allow.check("10.9.8.7".parse().unwrap()), None);
        assert!(allow.check("127.0.0.2".parse().unwrap()).is_some());
        assert!(allow.check("169.254.169.254".parse().unwrap()).is_some());
        assert!("10.0.0.0/33".parse::<AddrRange>().is_err());
        assert!("nope".parse::<AddrRange>().is_err());
    }
}

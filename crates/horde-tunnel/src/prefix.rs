//! Tunnel address prefixes (`10.77.0.2/32`, `fd77::/64`) and the server's table from
//! prefixes to clients, searched longest prefix first.

use std::net::IpAddr;
use std::str::FromStr;

use thiserror::Error;

/// An address prefix. The address may have host bits set (`10.77.0.1/24` names the
/// interface address and its network at once); matching looks at the first `len` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// The address as written (host bits may be set).
    pub addr: IpAddr,
    /// How many leading bits match.
    pub len: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
/// Why text is not a prefix.
pub enum PrefixError {
    #[error("\"{0}\" is not ADDRESS/LENGTH (e.g. 10.77.0.2/32 or fd77::2/128)")]
    /// Not `ADDRESS/LENGTH`.
    Syntax(String),
    #[error("\"{0}\": not an IP address")]
    /// The address part is not an IP address.
    Address(String),
    #[error("prefix length {len} is above {max} for {addr}")]
    /// The length is longer than the address family allows.
    Length {
        /// The address.
        addr: IpAddr,
        /// The length given.
        len: u8,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
}

impl FromStr for Prefix {
    type Err = PrefixError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, len) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| PrefixError::Syntax(s.to_string()))?;
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| PrefixError::Address(addr.to_string()))?;
        let len: u8 = len
            .parse()
            .map_err(|_| PrefixError::Syntax(s.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(PrefixError::Length { addr, len, max });
        }
        Ok(Prefix { addr, len })
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl Prefix {
    /// Whether `ip` falls in the prefix (same family, first `len` bits equal).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                masked(u32::from(a).into(), self.len, 32)
                    == masked(u32::from(b).into(), self.len, 32)
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                masked(u128::from(a), self.len, 128) == masked(u128::from(b), self.len, 128)
            }
            _ => false,
        }
    }

    /// Whether the two prefixes share any address.
    pub fn overlaps(&self, other: &Prefix) -> bool {
        let (wide, narrow) = if self.len <= other.len {
            (self, other)
        } else {
            (other, self)
        };
        wide.contains(narrow.addr)
    }
}

/// The top `len` of `bits` bits of `v`.
fn masked(v: u128, len: u8, bits: u8) -> u128 {
    if len == 0 {
        return 0;
    }
    let shift = u32::from(bits - len);
    (v >> shift) << shift
}

/// Prefixes mapped to values; [`PrefixTable::lookup`] finds the longest match. A linear
/// scan: a server has tens to hundreds of clients, and the scan touches a few cache lines.
#[derive(Debug, Clone)]
pub struct PrefixTable<T> {
    entries: Vec<(Prefix, T)>,
}

impl<T> Default for PrefixTable<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<T> PrefixTable<T> {
    /// Add a prefix; lookups prefer the longest prefix that matches.
    pub fn insert(&mut self, prefix: Prefix, value: T) {
        self.entries.push((prefix, value));
        // Longest first, so the first match is the best.
        self.entries.sort_by_key(|e| std::cmp::Reverse(e.0.len));
    }

    /// The value of the longest prefix that contains `ip`.
    pub fn lookup(&self, ip: IpAddr) -> Option<&T> {
        self.entries
            .iter()
            .find(|(p, _)| p.contains(ip))
            .map(|(_, v)| v)
    }

    /// Whether no prefix was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_parse_and_match() {
        assert!(p("10.77.0.0/24").contains(ip("10.77.0.9")));
        assert!(!p("10.77.0.0/24").contains(ip("10.77.1.9")));
        assert!(p("0.0.0.0/0").contains(ip("1.2.3.4")));
        assert!(!p("0.0.0.0/0").contains(ip("::1")));
        assert!(p("fd77::/64").contains(ip("fd77::5")));
        assert!(p("fd77::2/128").contains(ip("fd77::2")));
        assert!(!p("fd77::2/128").contains(ip("fd77::3")));
        assert_eq!(p("10.77.0.1/24").to_string(), "10.77.0.1/24");
        assert!(p("10.77.0.0/24").overlaps(&p("10.77.0.9/32")));
        assert!(!p("10.77.0.0/24").overlaps(&p("10.78.0.0/16")));
    }

    #[test]
    fn bad_prefixes_are_named() {
        assert!(matches!(
            "10.0.0.1".parse::<Prefix>(),
            Err(PrefixError::Syntax(_))
        ));
        assert!(matches!(
            "10.0.0/8".parse::<Prefix>(),
            Err(PrefixError::Address(_))
        ));
        assert_eq!(
            "10.0.0.1/33".parse::<Prefix>().unwrap_err().to_string(),
            "prefix length 33 is above 32 for 10.0.0.1"
        );
        assert!("fd00::1/129".parse::<Prefix>().is_err());
        assert!("fd00::1/x".parse::<Prefix>().is_err());
    }

    #[test]
    fn the_longest_prefix_wins() {
        let mut t = PrefixTable::default();
        t.insert(p("10.77.0.0/16"), "fleet");
        t.insert(p("10.77.3.0/24"), "bus-3");
        t.insert(p("fd77::3/128"), "bus-3 v6");
        assert_eq!(t.lookup(ip("10.77.3.7")), Some(&"bus-3"));
        assert_eq!(t.lookup(ip("10.77.4.7")), Some(&"fleet"));
        assert_eq!(t.lookup(ip("fd77::3")), Some(&"bus-3 v6"));
        assert_eq!(t.lookup(ip("10.78.0.1")), None);
    }
}

//! Who the client is, done safely.
//!
//! The address a request came from is its peer: the other end of the TCP connection, which a
//! server puts in the request's extensions ([`PeerAddr`]). Behind a reverse proxy the peer is
//! the proxy, and the client's address is in a header the proxy appends to
//! (`X-Forwarded-For`, or `Forwarded: for=` of RFC 7239). Anyone can send those headers, so
//! they are believed only from peers inside the configured trusted proxy ranges: the chain is
//! read from the right (the hop nearest to us) leftwards, skipping trusted proxies, and the
//! first address not trusted is the client. A spoofed header from anyone else is ignored, and
//! a hop a trusted proxy wrote that is not an address (`unknown`, an obfuscated name, junk)
//! leaves the request without a usable IP rather than guessing.

use std::net::{IpAddr, SocketAddr};

use http::Request;
use ipnet::IpNet;

/// The peer address of a request (the other end of its connection), put in the request's
/// extensions by the server. A `std::net::SocketAddr` in the extensions is read too, and with
/// the `axum` feature so is axum's `ConnectInfo<SocketAddr>`, which an axum server served with
/// `into_make_service_with_connect_info::<SocketAddr>()` records for every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub IpAddr);

/// Which header trusted proxies write the client chain to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default; what most proxies append).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

impl ForwardedHeader {
    /// The header's name.
    pub const fn name(self) -> &'static str {
        match self {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => "forwarded",
        }
    }
}

/// How the client IP is found: the trusted proxy ranges and the header they write. With no
/// trusted proxies (the default), the client IP is the peer, and forwarding headers are
/// ignored.
///
/// ```
/// use redis_ratelimit::rules::{ClientIp, PeerAddr};
/// let ip = ClientIp::new().trust("10.0.0.0/8".parse().unwrap());
/// let via_proxy = http::Request::builder()
///     .header("x-forwarded-for", "198.51.100.7, 10.0.0.9")
///     .extension(PeerAddr("10.0.0.2".parse().unwrap()))
///     .body(())
///     .unwrap();
/// assert_eq!(ip.resolve(&via_proxy), Some("198.51.100.7".parse().unwrap()));
///
/// let spoofed = http::Request::builder()
///     .header("x-forwarded-for", "1.2.3.4")
///     .extension(PeerAddr("203.0.113.9".parse().unwrap()))
///     .body(())
///     .unwrap();
/// assert_eq!(ip.resolve(&spoofed), Some("203.0.113.9".parse().unwrap()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientIp {
    trusted: Vec<IpNet>,
    header: ForwardedHeader,
}

impl ClientIp {
    /// No trusted proxies: the client is the peer.
    pub fn new() -> Self {
        ClientIp::default()
    }

    /// Trusts the proxies in `range`.
    pub fn trust(mut self, range: IpNet) -> Self {
        self.trusted.push(range);
        self
    }

    /// Reads the chain from `header` (default `X-Forwarded-For`).
    pub fn header(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// The trusted ranges.
    pub fn trusted(&self) -> &[IpNet] {
        &self.trusted
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// The client IP of `req`, or None when it has no peer address or a trusted proxy named
    /// the client with something that is not an address.
    pub fn resolve<B>(&self, req: &Request<B>) -> Option<IpAddr> {
        let peer = peer_of(req)?;
        if !self.is_trusted(peer) {
            return Some(peer);
        }
        let mut nearest = peer;
        for hop in self.chain(req).iter().rev() {
            let ip = hop.as_deref().and_then(parse_hop)?;
            if !self.is_trusted(ip) {
                return Some(ip);
            }
            nearest = ip;
        }
        // Every hop is a trusted proxy: the farthest one is where the request started.
        Some(nearest)
    }

    /// The hops of the forwarding header, in order (every field line, comma-separated);
    /// each hop as written (`for=` value for `Forwarded`), None when a `Forwarded` element
    /// names no `for`.
    fn chain<B>(&self, req: &Request<B>) -> Vec<Option<String>> {
        let mut hops = Vec::new();
        for value in req.headers().get_all(self.header.name()) {
            let Ok(text) = value.to_str() else {
                // Not text: nothing in it can be trusted to name an address.
                hops.push(None);
                continue;
            };
            for element in text.split(',') {
                let element = element.trim();
                hops.push(match self.header {
                    ForwardedHeader::XForwardedFor => Some(element.to_owned()),
                    ForwardedHeader::Forwarded => forwarded_for(element),
                });
            }
        }
        hops
    }
}

/// The peer address from the extensions: [`PeerAddr`], else a `SocketAddr`, else (with the
/// `axum` feature) axum's `ConnectInfo<SocketAddr>`.
fn peer_of<B>(req: &Request<B>) -> Option<IpAddr> {
    let ext = req.extensions();
    let peer = ext.get::<PeerAddr>().map(|p| p.0).or_else(|| ext.get::<SocketAddr>().map(SocketAddr::ip));
    #[cfg(feature = "axum")]
    let peer = peer.or_else(|| ext.get::<axum::extract::ConnectInfo<SocketAddr>>().map(|info| info.0.ip()));
    peer.map(canonical)
}

/// An IPv4 address mapped into IPv6 (`::ffff:1.2.3.4`, as dual-stack sockets report IPv4
/// peers) is that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The `for=` value of one `Forwarded` element, unquoted.
fn forwarded_for(element: &str) -> Option<String> {
    element.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        k.trim().eq_ignore_ascii_case("for").then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// One hop as an address: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]:80`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| hop.strip_prefix('[').and_then(|h| h.strip_suffix(']')).and_then(|h| h.parse().ok()))
        .map(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(peer: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().extension(PeerAddr(peer.parse().unwrap()));
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn headers_count_only_from_trusted_proxies_read_from_the_right() {
        let c = ClientIp::new().trust("10.0.0.0/8".parse().unwrap()).trust("192.168.1.1/32".parse().unwrap());
        // Untrusted peer: its headers are ignored whatever they say.
        assert_eq!(c.resolve(&req("203.0.113.5", &[("x-forwarded-for", "1.1.1.1")])), ip("203.0.113.5"));
        // Two trusted hops, then the client; what the client wrote further left is ignored.
        let chain = "6.6.6.6, 198.51.100.7, 10.1.1.1";
        assert_eq!(c.resolve(&req("192.168.1.1", &[("x-forwarded-for", chain)])), ip("198.51.100.7"));
        // Several field lines are one list, in order.
        let r = req("10.0.0.1", &[("x-forwarded-for", "7.7.7.7"), ("x-forwarded-for", "10.2.2.2")]);
        assert_eq!(c.resolve(&r), ip("7.7.7.7"));
        // Junk where a trusted proxy names the client: no usable IP, not a guess.
        assert_eq!(c.resolve(&req("10.0.0.1", &[("x-forwarded-for", "unknown")])), None);
        // Junk further left than the client does not matter.
        assert_eq!(c.resolve(&req("10.0.0.1", &[("x-forwarded-for", "junk, 8.8.8.8")])), ip("8.8.8.8"));
        // A trusted peer with no header is itself the client.
        assert_eq!(c.resolve(&req("10.0.0.1", &[])), ip("10.0.0.1"));
        // Ports and brackets are stripped; mapped IPv4 is IPv4.
        assert_eq!(c.resolve(&req("::ffff:10.0.0.1", &[("x-forwarded-for", "[2001:db8::1]:443")])), ip("2001:db8::1"));
        assert_eq!(c.resolve(&req("10.0.0.1", &[("x-forwarded-for", "198.51.100.7:5555")])), ip("198.51.100.7"));
    }

    #[test]
    fn the_forwarded_header_is_read_only_when_configured() {
        let c = ClientIp::new().trust("10.0.0.0/8".parse().unwrap()).header(ForwardedHeader::Forwarded);
        let r = req("10.0.0.1", &[("forwarded", "for=5.5.5.5, for=\"[2001:db8::17]:4711\";proto=https")]);
        assert_eq!(c.resolve(&r), ip("2001:db8::17"));
        // The proxy writes Forwarded, so an X-Forwarded-For the client sent is ignored.
        assert_eq!(c.resolve(&req("10.0.0.1", &[("x-forwarded-for", "5.5.5.5")])), ip("10.0.0.1"));
        assert_eq!(c.resolve(&req("10.0.0.1", &[("forwarded", "for=_hidden")])), None);
    }

    #[test]
    fn no_peer_no_ip() {
        assert_eq!(ClientIp::new().resolve(&Request::new(())), None);
        let with_socket = Request::builder().extension("127.0.0.1:9".parse::<SocketAddr>().unwrap()).body(()).unwrap();
        assert_eq!(ClientIp::new().resolve(&with_socket), ip("127.0.0.1"));
    }
}

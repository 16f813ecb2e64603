//! [`PermitTicket`]: a held permit as text, for work that ends where it was not acquired.

use super::Error;

/// A held permit handed over by [`Permit::into_ticket`](super::Permit::into_ticket): the key,
/// where it is held and the token it is held under, as text to carry (`encode`) and read back
/// (`decode`). The token is what releases the permit, so the ticket is a secret of whoever holds it: it prints as
/// `PermitTicket(..)`, and a client should never see it. No client can make one that releases
/// another's permit: the token is the library's, random per limiter.
#[derive(Clone, PartialEq, Eq)]
pub struct PermitTicket {
    pub(super) source: TicketSource,
    pub(super) holder: String,
    pub(super) key: String,
}

/// Where a ticket's permit is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TicketSource {
    Store,
    LocalBudget,
    /// Given by fail-open: held nowhere.
    Nowhere,
}

impl std::fmt::Debug for PermitTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PermitTicket(..)")
    }
}

impl PermitTicket {
    /// The text form: `p1:SOURCE:TOKEN:KEY`, the key as it is (it may hold `:` too).
    pub fn encode(&self) -> String {
        let source = match self.source {
            TicketSource::Store => 's',
            TicketSource::LocalBudget => 'l',
            TicketSource::Nowhere => 'o',
        };
        format!("p1:{source}:{}:{}", self.holder, self.key)
    }

    /// Reads the text [`PermitTicket::encode`] wrote; anything else is refused, naming what is
    /// wrong and never echoing the text (it may be a ticket).
    pub fn decode(text: &str) -> Result<PermitTicket, Error> {
        let bad = |what: &str| Error::InvalidKey(format!("not a permit ticket: {what}"));
        let mut parts = text.splitn(4, ':');
        if parts.next() != Some("p1") {
            return Err(bad("it does not start with p1:"));
        }
        let source = match parts.next() {
            Some("s") => TicketSource::Store,
            Some("l") => TicketSource::LocalBudget,
            Some("o") => TicketSource::Nowhere,
            _ => return Err(bad("unknown source, expected s, l or o")),
        };
        let holder = parts.next().unwrap_or_default();
        let token_shape = holder.split_once('.').is_some_and(|(prefix, n)| {
            prefix.len() == 32
                && (1..=16).contains(&n.len())
                && prefix.bytes().chain(n.bytes()).all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if !token_shape {
            return Err(bad("its token is not one the library makes"));
        }
        let key = parts.next().ok_or_else(|| bad("it names no key"))?;
        Ok(PermitTicket { source, holder: holder.to_owned(), key: key.to_owned() })
    }

    /// The key the permit was acquired on.
    pub fn key(&self) -> &str {
        &self.key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn every_ticket_reads_back_as_itself() {
        for source in [TicketSource::Store, TicketSource::LocalBudget, TicketSource::Nowhere] {
            for key in ["k", "a:{b} c", "\u{e9}t\u{e9}\n%25:p1:s", &"x".repeat(512)] {
                let ticket =
                    PermitTicket { source, holder: format!("{}.ff", "0123456789abcdef".repeat(2)), key: key.into() };
                assert_eq!(PermitTicket::decode(&ticket.encode()).expect("its own text"), ticket);
            }
        }
    }

    #[test]
    fn text_that_is_not_a_ticket_is_refused_by_what_is_wrong_without_echoing_it() {
        let token = format!("{}.1", "a".repeat(32));
        for (bad, why) in [
            ("", "p1:"),
            (&*format!("p2:s:{token}:6b"), "p1:"),
            (&*format!("p1:x:{token}:6b"), "source"),
            ("p1:s:secret-token:6b", "token"),
            (&*format!("p1:s:{}.1:6b", "A".repeat(32)), "token"),
            (&*format!("p1:s:{token}"), "no key"),
        ] {
            let e = PermitTicket::decode(bad).expect_err(bad);
            assert!(e.to_string().contains(why) && e.kind() == ErrorKind::Request, "{bad}: {e}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }
}

//! Names on the network: the gossipsub topic and protocol ids of an overlay.
//!
//! Every name embeds the overlay (network) name, so two overlays on one LAN never
//! exchange presence, records or messages.

use std::fmt;

use crate::wire::VERSION;

/// The overlay used when none is configured.
pub const DEFAULT_NETWORK: &str = "default";

/// A validated overlay name: 1 to 64 characters from `a-z 0-9 . _ -`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Network(String);

/// An overlay name was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("network name {0:?} must be 1-64 characters from a-z 0-9 . _ -")]
pub struct BadNetworkName(pub String);

impl Network {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<Self, BadNetworkName> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
            });
        if ok {
            Ok(Self(name.to_owned()))
        } else {
            Err(BadNetworkName(name.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Gossipsub topic carrying announcements and goodbyes.
    pub fn announce_topic(&self) -> String {
        format!("interlink-p2p/v{VERSION}/{}/announce", self.0)
    }

    /// Kademlia protocol id (a private DHT, never the public IPFS one).
    pub fn kad_protocol(&self) -> String {
        format!("/interlink-p2p/{}/kad/{VERSION}", self.0)
    }

    /// Request-response protocol for live delivery of envelopes.
    pub fn deliver_protocol(&self) -> String {
        format!("/interlink-p2p/{}/deliver/{VERSION}", self.0)
    }

    /// Stream protocol carrying live delivery requests and their answers one after
    /// another on one kept stream (PROTOCOL §8.3).
    pub fn deliver_stream_protocol(&self) -> String {
        format!("/interlink-p2p/{}/deliver-stream/{VERSION}", self.0)
    }

    /// Request-response protocol for handing a mailbox copy to a holder directly (relays)
    /// and fetching one back.
    pub fn mailbox_protocol(&self) -> String {
        format!("/interlink-p2p/{}/mailbox/{VERSION}", self.0)
    }

    /// Request-response protocol of the device-link exchange (PROTOCOL §8.8), spoken
    /// only by the short-lived nodes of `invite --device` and `join`.
    pub fn device_link_protocol(&self) -> String {
        format!("/interlink-p2p/{}/device-link/{VERSION}", self.0)
    }

    /// Request-response protocol for receipts of mail a session collected from its
    /// mailbox, sent to the sessions that sent it.
    pub fn receipt_protocol(&self) -> String {
        format!("/interlink-p2p/{}/receipt/{VERSION}", self.0)
    }

    /// Request-response protocol for fetching a peer's roster.
    pub fn roster_protocol(&self) -> String {
        format!("/interlink-p2p/{}/roster/{VERSION}", self.0)
    }

    /// The identify protocol version string.
    pub fn identify_version(&self) -> String {
        format!("interlink-p2p/1/{}", self.0)
    }
}

impl Default for Network {
    fn default() -> Self {
        Self(DEFAULT_NETWORK.to_owned())
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;

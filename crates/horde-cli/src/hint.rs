//! What to check when a connection cannot be set up, in the words of the files the
//! user wrote.

use horde_crypto::PublicKey;
use horde_net::NetError;

/// A handshake that never completed, explained from what the sender saw. No reply at all
/// is almost always a key problem: the receiver drops (without reply, so as not to be
/// probed) a handshake that is not for its key or that comes from a key it does not allow.
/// Cookie replies mean the receiver heard us and knows our key's format is right, but was
/// under load (a flood, perhaps from our own network) and never accepted the handshake.
pub fn handshake(e: NetError, ours: &PublicKey, peer_key: &str) -> anyhow::Error {
    match e {
        NetError::HandshakeTimeout(seen) if seen.bad_responses > 0 => anyhow::anyhow!(
            "the handshake failed: {seen}. Check that peer_key ({}) is the receiver's \
             public key; otherwise something on the path alters or forges datagrams.",
            peer_key.trim()
        ),
        NetError::HandshakeTimeout(seen) if seen.cookie_replies > 0 => anyhow::anyhow!(
            "the handshake failed: {seen}. The receiver is reachable and got our initiations; \
             it is flooded or rate-limits this address (a shared NAT?). Check its log for \
             refused handshakes, and that this sender's public key, {ours}, is in its allowed_keys."
        ),
        NetError::HandshakeTimeout(seen) => anyhow::anyhow!(
            "the receiver did not answer the handshake ({seen}). Check that:\n  \
             - peer_key ({}) is the receiver's public key (printed by `horde keygen` for its key_file);\n  \
             - this sender's public key, {ours}, is in the receiver's allowed_keys;\n  \
             - the receiver is running and its [[interfaces]] bind the channels' remote addresses.",
            peer_key.trim()
        ),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_crypto::Keypair;
    use horde_net::HandshakeSeen;

    #[test]
    fn a_timeout_names_both_keys_and_the_allow_list() {
        let ours = *Keypair::generate().public();
        let silent = HandshakeSeen {
            initiations_sent: 7,
            ..HandshakeSeen::default()
        };
        let msg = handshake(NetError::HandshakeTimeout(silent), &ours, " PEER ").to_string();
        assert!(msg.contains("peer_key (PEER)"), "{msg}");
        assert!(msg.contains(&ours.to_string()), "{msg}");
        assert!(msg.contains("allowed_keys"), "{msg}");
        assert!(msg.contains("no reply at all to 7 initiation(s)"), "{msg}");
        // Cookie replies: the receiver is there and loaded, not a key mix-up first.
        let loaded = HandshakeSeen {
            cookie_replies: 3,
            ..silent
        };
        let msg = handshake(NetError::HandshakeTimeout(loaded), &ours, "PEER").to_string();
        assert!(msg.contains("3 cookie reply(ies)"), "{msg}");
        assert!(msg.contains("rate-limits this address"), "{msg}");
        let forged = HandshakeSeen {
            bad_responses: 2,
            ..silent
        };
        let msg = handshake(NetError::HandshakeTimeout(forged), &ours, "PEER").to_string();
        assert!(msg.contains("2 response(s)"), "{msg}");
        let other = handshake(NetError::HostGone, &ours, "PEER").to_string();
        assert_eq!(other, NetError::HostGone.to_string());
    }
}

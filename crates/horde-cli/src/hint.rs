//! What to check when a connection cannot be set up, in the words of the files the
//! user wrote.

use horde_crypto::PublicKey;
use horde_net::NetError;

/// A handshake that got no answer is almost always a key problem: the receiver drops
/// (without reply, so as not to be probed) a handshake that is not for its key or that
/// comes from a key it does not allow.
pub fn handshake(e: NetError, ours: &PublicKey, peer_key: &str) -> anyhow::Error {
    match e {
        NetError::HandshakeTimeout => anyhow::anyhow!(
            "the receiver did not answer the handshake. Check that:\n  \
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

    #[test]
    fn a_timeout_names_both_keys_and_the_allow_list() {
        let ours = *Keypair::generate().public();
        let msg = handshake(NetError::HandshakeTimeout, &ours, " PEER ").to_string();
        assert!(msg.contains("peer_key (PEER)"), "{msg}");
        assert!(msg.contains(&ours.to_string()), "{msg}");
        assert!(msg.contains("allowed_keys"), "{msg}");
        let other = handshake(NetError::HostGone, &ours, "PEER").to_string();
        assert_eq!(other, NetError::HostGone.to_string());
    }
}

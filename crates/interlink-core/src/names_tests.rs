use super::*;

#[test]
fn names_embed_the_network() {
    let n = Network::default();
    assert_eq!(n.announce_topic(), "interlink-p2p/v14/default/announce");
    assert_eq!(n.deliver_protocol(), "/interlink-p2p/default/deliver/14");
    assert_eq!(n.receipt_protocol(), "/interlink-p2p/default/receipt/14");
    assert_eq!(n.mailbox_protocol(), "/interlink-p2p/default/mailbox/14");
    assert_eq!(
        n.device_link_protocol(),
        "/interlink-p2p/default/device-link/14"
    );
    assert_ne!(
        Network::new("lab").unwrap().kad_protocol(),
        n.kad_protocol()
    );
    assert!(Network::new("Bad Name").is_err());
    assert!(Network::new("").is_err());
}

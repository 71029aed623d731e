//! The request-response events of the node's protocols, in the two shapes their
//! handlers act on: a peer asked, or one of our requests ended (answered or failed).
//! Every protocol correlates the end with what it asked by the request id, so an
//! answer and a failure take the same path and the lookup is written once.

use libp2p::{
    PeerId,
    request_response::{self, OutboundFailure, OutboundRequestId, ResponseChannel},
    swarm::ConnectionId,
};
use tracing::debug;

pub(super) enum Exchange<Req, Resp> {
    /// A peer asks; the answer goes back on `channel`.
    Asked {
        peer: PeerId,
        connection: ConnectionId,
        request: Req,
        channel: ResponseChannel<Resp>,
    },
    /// Our request `id` to `peer` was answered or failed.
    Ended {
        peer: PeerId,
        id: OutboundRequestId,
        result: Result<Resp, OutboundFailure>,
    },
}

impl<Req, Resp> Exchange<Req, Resp> {
    /// `event` as an exchange; `None` for what needs nothing done: a response sent,
    /// or a peer's request that failed before it was read (logged under `protocol`).
    pub(super) fn of(event: request_response::Event<Req, Resp>, protocol: &str) -> Option<Self> {
        match event {
            request_response::Event::Message {
                peer,
                connection_id,
                message:
                    request_response::Message::Request {
                        request, channel, ..
                    },
            } => Some(Self::Asked {
                peer,
                connection: connection_id,
                request,
                channel,
            }),
            request_response::Event::Message {
                peer,
                message:
                    request_response::Message::Response {
                        request_id,
                        response,
                    },
                ..
            } => Some(Self::Ended {
                peer,
                id: request_id,
                result: Ok(response),
            }),
            request_response::Event::OutboundFailure {
                peer,
                request_id,
                error,
                ..
            } => {
                let error = crate::swarm::declined_as_unsupported(error);
                debug!(%peer, %error, protocol, "request failed");
                Some(Self::Ended {
                    peer,
                    id: request_id,
                    result: Err(error),
                })
            }
            request_response::Event::InboundFailure { peer, error, .. } => {
                debug!(%peer, %error, protocol, "inbound request failed");
                None
            }
            request_response::Event::ResponseSent { .. } => None,
        }
    }
}

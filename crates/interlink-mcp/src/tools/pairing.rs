//! The pairing tools: the peer list (`list_peers`, `add_peer`, `remove_peer`) and
//! pairing by knock (`request_pair`, `list_pair_requests`, `accept_pair`,
//! `reject_pair`). Pairing is the operator's decision; the tool descriptions say so.

use interlink_core::{
    IdentityKey,
    presence::{IdentityView, Presence},
    routing::{RouteError, RouteRequest},
    trust::{KeyPattern, MIN_KEY_PREFIX},
    wire::{EnvelopeKind, SessionAddr},
};
use interlink_net::{Handle, SendError, SendOutcome};
use rmcp::{
    RoleServer,
    handler::server::{
        tool::{InputResponses, RequestState},
        wrapper::Parameters,
    },
    model::{CallToolResponse, CallToolResult},
    service::RequestContext,
    tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::{
    consent::{self, Asked, Consent},
    context::{Context, ToolError},
    pairing::{self, Incoming},
    peers, policy,
    server::Server,
};

/// Arguments of `request_pair`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestPairArgs {
    /// Its fingerprint, or 4+ hex digits of it (from discover).
    pub target: String,
    /// Session id or prefix; optional when it has one live session.
    #[serde(default)]
    pub session: Option<String>,
    /// Petname to give it (default: the one it suggests).
    #[serde(default)]
    pub name: Option<String>,
}

/// Arguments of `add_peer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddPeerArgs {
    /// Petname: 1-32 of A-Z a-z 0-9 . _ -
    pub name: String,
    /// The peer's identity key, 64 hex digits.
    pub key: String,
}

/// Arguments of `remove_peer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemovePeerArgs {
    /// The peer's petname.
    pub name: String,
}

/// Arguments of `accept_pair` and `reject_pair`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FingerprintArgs {
    /// The requester's fingerprint (list_pair_requests), or 4+ hex digits of it.
    pub fingerprint: String,
}

/// A waiting request as structuredContent.
fn incoming_json(i: &Incoming) -> serde_json::Value {
    json!({
        "identity_key": i.identity_key,
        "fingerprint": i.fingerprint,
        "suggested_name": i.name,
        "session": i.session,
        "msg_id": i.msg_id,
        "knocked_at": i.knocked_at,
        "via_session": i.via_session,
    })
}

impl Context {
    /// Sends a knock or pair acceptance under this user's name
    /// ([`crate::sender::send_pairing`]).
    pub(crate) async fn send_pairing(
        &self,
        handle: &Handle,
        to: SessionAddr,
        kind: EnvelopeKind,
    ) -> Result<SendOutcome, SendError> {
        crate::sender::send_pairing(handle, &self.name, to, kind).await
    }
}

/// The one identity on the roster, other than this user's, that `text` designates: a
/// full key, or a fingerprint or key prefix of at least 4 hex digits.
fn stranger_on_roster(
    roster: &[IdentityView],
    text: &str,
    own: &IdentityKey,
) -> Result<IdentityKey, ToolError> {
    let Some(pattern) = KeyPattern::parse(text) else {
        return Err(ToolError(format!(
            "target {text:?}: give the identity's fingerprint as discover shows it (or at least \
             {MIN_KEY_PREFIX} hex digits of it or of its key)"
        )));
    };
    let hits: Vec<IdentityKey> = roster
        .iter()
        .map(|i| i.key)
        .filter(|k| k != own && pattern.matches(k))
        .collect();
    match hits.as_slice() {
        [one] => Ok(*one),
        [] => Err(ToolError(format!(
            "no identity on the overlay matches {text:?} (this user's own sessions need no \
             pairing); see discover — a knock needs a session that is on the overlay"
        ))),
        many => Err(ToolError(format!(
            "{text:?} matches several identities: {}; give more digits",
            many.iter()
                .map(|k| k.fingerprint().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[tool_router(router = pairing_router, vis = "pub(crate)")]
impl Server {
    /// Knock on a session of an identity that is not a peer, to pair; its user decides.
    /// Only when your user asks.
    #[tool]
    async fn request_pair(&self, Parameters(args): Parameters<RequestPairArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        let result = async {
            let own = ctx.own()?;
            let petname = args
                .name
                .as_deref()
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| {
                    if interlink_core::wire::is_valid_name(n) {
                        Ok(n.to_owned())
                    } else {
                        Err(ToolError(format!(
                            "name {n:?}: use 1-32 characters from A-Z a-z 0-9 . _ -"
                        )))
                    }
                })
                .transpose()?;
            let ready = ctx.ready().await?;
            let roster = ready.handle.roster().await?;
            let policy = policy::load(&ctx.home)?;
            // A peer's petname asks that peer again (its side re-confirms).
            let key = match policy.get(args.target.trim()) {
                Some(k) => *k,
                None => stranger_on_roster(&roster, &args.target, &own.key)?,
            };
            let peer_name = policy.name_of(&key).map(str::to_owned);
            // It asked first: asking back is this user's consent, so the pair is made.
            if peer_name.is_none()
                && pairing::current(&ctx.home, ctx.clock.now_ms())?
                    .incoming
                    .iter()
                    .any(|i| i.identity_key == key.to_hex())
            {
                let accepted = pairing::accept(&ctx.home, &key.to_hex())?;
                ctx.refresh_policy().await;
                let status = ctx.confirm_pair(&accepted).await?;
                return Ok((
                    format!(
                        "paired: {} had asked to pair too; added as {:?}, confirmation {status}",
                        key.fingerprint(),
                        accepted.petname
                    ),
                    json!({
                        "status": "paired",
                        "petname": accepted.petname,
                        "fingerprint": key.fingerprint().to_string(),
                        "confirmation": status,
                    }),
                ));
            }
            let req = RouteRequest {
                target: key,
                session: args.session.as_deref(),
                own: &own,
                sticky: None,
                remembered: None,
            };
            let route =
                interlink_core::routing::route_identities(&roster, &req).map_err(|e| match e {
                    RouteError::NoSession => ToolError(format!(
                        "{} has no session on the overlay",
                        key.fingerprint()
                    )),
                    other => ToolError(format!("cannot choose a session to knock: {other}")),
                })?;
            if route.presence == Presence::Gone {
                return Err(ToolError(format!(
                    "session {} of {} is not on the overlay; a knock goes to a live (or away) \
                     session — see discover",
                    route.session,
                    key.fingerprint()
                )));
            }
            let to = SessionAddr {
                key,
                session: route.session.clone(),
            };
            pairing::record_outgoing(
                &ctx.home,
                &key,
                &route.session,
                petname.clone(),
                ctx.clock.now_ms(),
            )?;
            let outcome = ctx
                .send_pairing(&ready.handle, to, EnvelopeKind::Knock)
                .await
                .map_err(|e| ToolError(format!("the pair request was not sent: {e}")))?;
            let status = match outcome {
                SendOutcome::Delivered(_) => "delivered",
                SendOutcome::Queued { .. } => "queued",
            };
            let next = match &peer_name {
                Some(name) => format!(
                    "It is already a peer here, named {name:?}: its side confirms again if it \
                     lost this user, else its operator decides."
                ),
                None => format!(
                    "It waits for its operator; when they accept, it is added to the peers \
                     here as well. This user suggested the name {:?}.",
                    ctx.name
                ),
            };
            Ok::<_, ToolError>((
                format!(
                    "pair request {status} to {} (session {}, {}). {next}",
                    key.fingerprint(),
                    route.session,
                    route.presence,
                ),
                json!({
                    "status": status,
                    "identity_key": key.to_hex(),
                    "fingerprint": key.fingerprint().to_string(),
                    "session_id": route.session.as_str(),
                    "presence": route.presence.to_string(),
                    "suggested_name": ctx.name,
                    "petname": petname,
                }),
            ))
        }
        .await;
        match result {
            Ok((text, value)) => ctx.ok(text, value),
            Err(e) => ctx.error(e),
        }
    }

    /// Pair requests waiting for your user's decision, and those sent.
    #[tool(annotations(read_only_hint = true))]
    async fn list_pair_requests(&self) -> CallToolResult {
        let ctx = &self.ctx;
        match pairing::current(&ctx.home, ctx.clock.now_ms()) {
            Ok(state) => {
                let mut text = String::new();
                if state.incoming.is_empty() {
                    text.push_str("no pair requests waiting");
                } else {
                    text.push_str(
                        "waiting for the operator's decision (accept_pair / reject_pair):\n",
                    );
                    for i in &state.incoming {
                        text.push_str(&format!(
                            "  {} suggests the name {}, knocked from session {}\n",
                            i.fingerprint,
                            crate::render::framing::quoted(i.name.as_deref().unwrap_or("-")),
                            crate::render::framing::inline(&i.session)
                        ));
                    }
                }
                for o in &state.outgoing {
                    text.push_str(&format!(
                        "\nsent, not accepted yet: {} (session {})",
                        o.identity_key, o.session
                    ));
                }
                let incoming: Vec<_> = state.incoming.iter().map(incoming_json).collect();
                let outgoing: Vec<_> = state
                    .outgoing
                    .iter()
                    .map(|o| {
                        json!({"identity_key": o.identity_key, "session": o.session,
                               "petname": o.petname, "sent_at": o.sent_at})
                    })
                    .collect();
                ctx.ok(
                    text.trim_end().to_owned(),
                    json!({"incoming": incoming, "outgoing": outgoing}),
                )
            }
            Err(e) => ctx.error(e.into()),
        }
    }

    /// Accept a pair request: pin the requester's key and confirm to it. Only when your
    /// user asks; they confirm in a form.
    #[tool]
    async fn accept_pair(
        &self,
        context: RequestContext<RoleServer>,
        InputResponses(responses): InputResponses,
        RequestState(state): RequestState,
        Parameters(args): Parameters<FingerprintArgs>,
    ) -> CallToolResponse {
        let ctx = &self.ctx;
        let call = consent::Call {
            context: &context,
            responses: responses.as_ref(),
            state: state.as_deref(),
            subject: format!("accept_pair {}", args.fingerprint.trim()),
        };
        let result = async {
            let request = pairing::request(&ctx.home, &args.fingerprint)?;
            let question = format!(
                "Pair with {} (it suggests the name {:?})? It knocked from its session {:?}. Once \
                 paired, it may message every session of yours, and your agent may act on \
                 what it writes. Say yes only if you know who this is.",
                request.fingerprint,
                request.name.as_deref().unwrap_or("none"),
                request.session,
            );
            let command = format!("interlink-p2p pair accept {}", request.fingerprint);
            if let Some(form) = human_says_yes(ctx, &call, &question, &command).await? {
                return Ok(Err(form));
            }
            let accepted = pairing::accept(&ctx.home, &args.fingerprint)?;
            ctx.refresh_policy().await;
            let confirmation = match ctx.confirm_pair(&accepted).await {
                Ok(status) => status.to_owned(),
                Err(e) => format!("not sent: {}", e.0),
            };
            Ok::<_, ToolError>(Ok((
                format!(
                    "paired: {} is now the peer {:?}; confirmation to its session {}: {confirmation}",
                    accepted.key.fingerprint(),
                    accepted.petname,
                    accepted.request.session
                ),
                json!({
                    "name": accepted.petname,
                    "identity_key": accepted.key.to_hex(),
                    "fingerprint": accepted.key.fingerprint().to_string(),
                    "session": accepted.request.session,
                    "confirmation": confirmation,
                }),
            )))
        }
        .await;
        match result {
            Ok(Ok((text, value))) => ctx.ok(text, value).into(),
            Ok(Err(form)) => CallToolResponse::InputRequired(*form),
            Err(e) => ctx.error(e).into(),
        }
    }

    /// Discard a pair request (the requester is not told). Only when your user asks.
    #[tool]
    async fn reject_pair(&self, Parameters(args): Parameters<FingerprintArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        match pairing::reject(&ctx.home, &args.fingerprint) {
            Ok(r) => ctx.ok(
                format!("rejected the pair request of {}", r.fingerprint),
                json!({"identity_key": r.identity_key, "fingerprint": r.fingerprint}),
            ),
            Err(e) => ctx.error(e.into()),
        }
    }

    /// The paired identities: petname, fingerprint, key.
    #[tool(annotations(read_only_hint = true))]
    async fn list_peers(&self) -> CallToolResult {
        let ctx = &self.ctx;
        match peers::list(&ctx.home) {
            Ok(list) => {
                let text = if list.is_empty() {
                    "no peers yet (pairing is the operator's decision)".to_owned()
                } else {
                    list.iter()
                        .map(|p| format!("{} ({}) {}", p.name, p.key.fingerprint(), p.key.to_hex()))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let peers: Vec<_> = list
                    .iter()
                    .map(|p| {
                        json!({
                            "name": p.name,
                            "identity_key": p.key.to_hex(),
                            "fingerprint": p.key.fingerprint().to_string(),
                        })
                    })
                    .collect();
                ctx.ok(text, json!({ "peers": peers }))
            }
            Err(e) => ctx.error(e.into()),
        }
    }

    /// Pair with a key directly, under a petname. Only when your user asks; they confirm in
    /// a form.
    #[tool]
    async fn add_peer(
        &self,
        context: RequestContext<RoleServer>,
        InputResponses(responses): InputResponses,
        RequestState(state): RequestState,
        Parameters(args): Parameters<AddPeerArgs>,
    ) -> CallToolResponse {
        let ctx = &self.ctx;
        let key = match args.key.trim().parse::<interlink_core::IdentityKey>() {
            Ok(key) => key,
            Err(e) => {
                return ctx
                    .error(ToolError(format!("key {:?}: {e}", args.key.trim())))
                    .into();
            }
        };
        let call = consent::Call {
            context: &context,
            responses: responses.as_ref(),
            state: state.as_deref(),
            subject: format!("add_peer {} {}", args.name.trim(), key.to_hex()),
        };
        let question = format!(
            "Add {} as the peer {:?}? It may then message every session of yours, and your \
             agent may act on what it writes. Say yes only if you know whose key this is.",
            key.fingerprint(),
            args.name.trim(),
        );
        let command = format!(
            "interlink-p2p peer add {} {}",
            consent::shell_word(args.name.trim()),
            key.to_hex()
        );
        match human_says_yes(ctx, &call, &question, &command).await {
            Ok(None) => {}
            Ok(Some(form)) => return CallToolResponse::InputRequired(*form),
            Err(e) => return ctx.error(e).into(),
        }
        let result = match peers::add(&ctx.home, args.name.trim(), &args.key) {
            Ok((key, added)) => {
                ctx.refresh_policy().await;
                let already = added == peers::Added::AlreadyPeer;
                ctx.ok(
                    format!(
                        "{} {} ({}); this session applies it now, the user's other sessions within a second",
                        if already { "already a peer:" } else { "added" },
                        args.name.trim(),
                        key.fingerprint()
                    ),
                    json!({
                        "name": args.name.trim(),
                        "identity_key": key.to_hex(),
                        "fingerprint": key.fingerprint().to_string(),
                        "added": !already,
                    }),
                )
            }
            Err(e) => ctx.error(e.into()),
        };
        result.into()
    }

    /// Unpair: the peer's messages are refused from now on. Only when your user asks.
    #[tool]
    async fn remove_peer(&self, Parameters(args): Parameters<RemovePeerArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        match peers::remove(&ctx.home, args.name.trim()) {
            Ok(key) => {
                ctx.refresh_policy().await;
                ctx.ok(
                    format!("removed {} ({})", args.name.trim(), key.fingerprint()),
                    json!({
                        "name": args.name.trim(),
                        "identity_key": key.to_hex(),
                        "fingerprint": key.fingerprint().to_string(),
                    }),
                )
            }
            Err(e) => ctx.error(e.into()),
        }
    }
}

impl Context {
    /// Sends the `pair_accept` for an accepted request to the session that knocked.
    pub(crate) async fn confirm_pair(
        &self,
        accepted: &pairing::Accepted,
    ) -> Result<&'static str, ToolError> {
        let session = interlink_core::SessionId::new(&accepted.request.session)
            .map_err(|e| ToolError(e.to_string()))?;
        let ready = self.ready().await?;
        let to = SessionAddr {
            key: accepted.key,
            session,
        };
        // This session admits the new peer already; the home's other running sessions
        // do once they have read the edited peers.json, before the requester hears it
        // may write to them.
        tokio::time::sleep(crate::session_node::POLICY_PICKUP).await;
        match self
            .send_pairing(&ready.handle, to, EnvelopeKind::PairAccept)
            .await
        {
            Ok(SendOutcome::Delivered(_)) => Ok("delivered"),
            Ok(SendOutcome::Queued { .. }) => Ok("queued"),
            Err(e) => Err(ToolError(format!(
                "{e}; its operator can add this user's key {} with `interlink-p2p peer add`",
                self.key().to_hex()
            ))),
        }
    }
}

/// Asks the human (or the opt-in) whether to admit a key. `Ok(None)`: go ahead;
/// `Ok(Some(form))`: return the form to the client (it asks and calls again); an error
/// names why not and the operator's `command`, and nothing was changed.
async fn human_says_yes(
    ctx: &Context,
    call: &consent::Call<'_>,
    question: &str,
    command: &str,
) -> Result<Option<Box<rmcp::model::InputRequiredResult>>, ToolError> {
    match consent::ask(ctx, call, question).await {
        Asked::Ask(form) => Ok(Some(form)),
        Asked::Decided(Consent::Given) => Ok(None),
        Asked::Decided(Consent::Refused(why)) => Err(ToolError(format!(
            "not paired: {why}; nothing was changed. Do not ask again unless your operator \
             tells you to."
        ))),
        Asked::Decided(Consent::Unavailable(why)) => Err(ToolError(format!(
            "not paired: admitting a key needs your operator, and {why}; nothing was changed. \
             Tell them to run: {command}"
        ))),
    }
}

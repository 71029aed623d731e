//! Admitting a key needs a human: the consent behind `accept_pair` and `add_peer`.
//!
//! A peer's text reaches the agent, so an agent can be talked into pairing. The tools
//! that admit a key therefore do not take the agent's word for it. When the MCP client
//! declared the `elicitation` capability (Claude Code does), the server asks the human
//! directly with a form the agent never sees the inside of, and acts only on an
//! explicit yes. When it did not, the tool changes nothing and names the operator's
//! command. `INTERLINK_AGENT_PAIRING=1` ([`crate::serve::Options::agent_pairing`])
//! restores agent-driven pairing for unattended setups, which have no human to ask.

use std::time::Duration;

use rmcp::{
    Peer, RoleServer,
    model::{
        ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
        ElicitationSchema, Implementation, InputRequest, InputRequiredResult, ProtocolVersion,
        RequestMetaObject,
    },
    service::{ElicitationError, RequestContext},
};
use serde::Deserialize;

/// How long the human has to answer the form.
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// The form's answer.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct Approval {
    /// Whether to admit the key.
    #[schemars(description = "Admit this key: it may then message every session of yours")]
    pub approve: bool,
}

rmcp::elicit_safe!(Approval);

/// How pairing is decided in this session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// The operator opted in to agent-driven pairing.
    Agent,
    /// The client can show the human a form (MCP elicitation).
    AskHuman,
    /// Nobody here can say yes: the operator runs the command.
    OperatorOnly,
}

impl Gate {
    /// The gate for a client that declared `elicitation_modes`, with the opt-in.
    pub(crate) fn new(agent_pairing: bool, can_ask: bool) -> Self {
        match (agent_pairing, can_ask) {
            (true, _) => Gate::Agent,
            (false, true) => Gate::AskHuman,
            (false, false) => Gate::OperatorOnly,
        }
    }

    /// How this gate reads, for `whoami`.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Gate::Agent => "agent (INTERLINK_AGENT_PAIRING=1)",
            Gate::AskHuman => "asks the human (MCP elicitation)",
            Gate::OperatorOnly => "operator command only",
        }
    }
}

/// What the human (or the opt-in) said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Consent {
    /// Go ahead.
    Given,
    /// The human said no, dismissed the form, or did not answer in time.
    Refused(String),
    /// Nobody could be asked: the operator must run the command.
    Unavailable(String),
}

/// The outcome of [`ask`]: a decision, or (protocol 2026-07-28, which has no
/// server-to-client requests) the form for the client to show, after which it calls the
/// tool again with the answer.
#[derive(Debug)]
pub(crate) enum Asked {
    Decided(Consent),
    /// Return this to the client: it asks the human and retries the call.
    Ask(Box<InputRequiredResult>),
}

/// Forms shown and not answered yet, at most; the oldest is forgotten first.
pub(crate) const PENDING_FORMS: usize = 16;
/// The key of the form in the input requests.
const FORM_KEY: &str = "approve";

/// One call of a tool that asks the human.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    /// The client's request context (its peer and the request's `_meta`).
    pub context: &'a RequestContext<RoleServer>,
    /// The client's answers from the previous round (protocol 2026-07-28).
    pub responses: Option<&'a rmcp::model::InputResponses>,
    /// The state echoed from the previous round.
    pub state: Option<&'a str>,
    /// What is asked about: the tool and its arguments, so an answer given for one
    /// call is never taken for another.
    pub subject: String,
}

/// Asks for consent to `question`, as the session's gate says: the opt-in says yes; a
/// client on protocol 2026-07-28 gets the form to show ([`Asked::Ask`]) and its answer
/// is read on the retry; an older client is sent an elicitation request; a client that
/// declared no elicitation cannot ask.
pub(crate) async fn ask(ctx: &crate::context::Context, call: &Call<'_>, question: &str) -> Asked {
    if ctx.agent_pairing {
        return Asked::Decided(Consent::Given);
    }
    let peer = &call.context.peer;
    let Some((caps, _, protocol)) = declared(peer, &call.context.meta) else {
        return Asked::Decided(unavailable());
    };
    if !can_ask(&caps) {
        return Asked::Decided(unavailable());
    }
    // A request that carries the client's context in `_meta` comes from a session
    // without `initialize` (2026-07-28), where the server may not send requests.
    let stateless = call.context.meta.client_capabilities().is_some()
        || protocol
            .as_deref()
            .is_some_and(|v| v >= ProtocolVersion::NO_INITIALIZE.as_str())
            && peer.peer_info().is_none();
    if !stateless {
        return Asked::Decided(
            match peer
                .elicit_with_timeout::<Approval>(question, Some(ASK_TIMEOUT))
                .await
            {
                Ok(Some(Approval { approve: true })) => Consent::Given,
                Ok(Some(Approval { approve: false })) | Ok(None) => {
                    Consent::Refused("the human did not approve".into())
                }
                Err(ElicitationError::UserDeclined) => {
                    Consent::Refused("the human declined".into())
                }
                Err(ElicitationError::UserCancelled) => {
                    Consent::Refused("the human dismissed the question".into())
                }
                Err(e) => Consent::Unavailable(format!("the human could not be asked: {e}")),
            },
        );
    }
    // The retry: an answer counts only with the state this server handed out for this
    // very call (the client echoes it; it names a form we remember, nothing more).
    if let (Some(responses), Some(state)) = (call.responses, call.state) {
        let ours = {
            let mut shared = ctx.shared();
            let pending = &mut shared.pending_forms;
            match pending
                .iter()
                .position(|(subject, token)| *subject == call.subject && token == state)
            {
                Some(i) => {
                    pending.remove(i);
                    true
                }
                None => false,
            }
        };
        if ours && let Some(answer) = responses.get(FORM_KEY) {
            return Asked::Decided(read_answer(answer));
        }
    }
    match form(question) {
        Ok(requests) => {
            let token = interlink_core::identity::hex_encode(&random_token());
            let mut shared = ctx.shared();
            if shared.pending_forms.len() >= PENDING_FORMS {
                shared.pending_forms.pop_front();
            }
            shared
                .pending_forms
                .push_back((call.subject.clone(), token.clone()));
            Asked::Ask(Box::new(InputRequiredResult::new(
                Some(requests),
                Some(token),
            )))
        }
        Err(e) => Asked::Decided(Consent::Unavailable(format!(
            "the form could not be made: {e}"
        ))),
    }
}

fn unavailable() -> Consent {
    Consent::Unavailable("this MCP client cannot ask the human (no elicitation)".into())
}

/// The form asking `question`, as the input requests of an [`InputRequiredResult`].
fn form(question: &str) -> Result<rmcp::model::InputRequests, serde_json::Error> {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.to_owned(),
        requested_schema: ElicitationSchema::from_type::<Approval>()?,
    };
    let mut requests = rmcp::model::InputRequests::new();
    requests.insert(
        FORM_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    Ok(requests)
}

/// The human's answer to the form, as the client returned it (an elicitation result).
fn read_answer(answer: &serde_json::Value) -> Consent {
    let Ok(result) = serde_json::from_value::<ElicitResult>(answer.clone()) else {
        return Consent::Refused("the answer to the form was not understood".into());
    };
    match result.action {
        ElicitationAction::Accept => {
            match result
                .content
                .and_then(|c| serde_json::from_value::<Approval>(c).ok())
            {
                Some(Approval { approve: true }) => Consent::Given,
                _ => Consent::Refused("the human did not approve".into()),
            }
        }
        ElicitationAction::Decline => Consent::Refused("the human declined".into()),
        _ => Consent::Refused("the human dismissed the question".into()),
    }
}

/// 128 random bits.
fn random_token() -> [u8; 16] {
    let mut b = [0u8; 16];
    rand_core::Rng::fill_bytes(&mut crate::session_node::os_rng(), &mut b);
    b
}

/// `text` as one word of a POSIX shell command line (single-quoted when it needs it).
pub(crate) fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@+".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// What the client declared: at `initialize` (protocols up to 2025-11-25), or in each
/// request's `_meta` (2026-07-28 has no handshake).
fn declared(
    peer: &Peer<RoleServer>,
    meta: &RequestMetaObject,
) -> Option<(ClientCapabilities, Option<Implementation>, Option<String>)> {
    if let Some(caps) = meta.client_capabilities() {
        return Some((
            caps,
            meta.client_info(),
            meta.protocol_version().map(|v| v.to_string()),
        ));
    }
    let info = peer.peer_info()?;
    Some((
        info.capabilities.clone(),
        Some(info.client_info.clone()),
        Some(info.protocol_version.to_string()),
    ))
}

/// Whether the client declared form elicitation.
fn can_ask(caps: &ClientCapabilities) -> bool {
    caps.elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// Notes whether the client can ask the human, from what it declared (at
/// `initialize`, or in a request's `_meta`), and the first time writes the declaration
/// to `sessions/<id>/client.json` (name, version, protocol, capabilities: what a support
/// question or a test needs to know about the host) once the session is bound.
pub(crate) fn note_client(
    ctx: &crate::context::Context,
    peer: &Peer<RoleServer>,
    meta: &RequestMetaObject,
) {
    // Once written, the declaration is known: a session keeps its client.
    if ctx.shared().client_noted {
        return;
    }
    let Some((caps, client, protocol)) = declared(peer, meta) else {
        return;
    };
    let asks = can_ask(&caps);
    let dir = ctx.session_dir().ok();
    {
        let mut shared = ctx.shared();
        shared.can_ask_human = asks;
        shared.client_noted = dir.is_some();
    }
    let Some(dir) = dir else {
        return;
    };
    let record = serde_json::json!({
        "name": client.as_ref().map(|c| c.name.clone()),
        "version": client.as_ref().map(|c| c.version.clone()),
        "protocol_version": protocol,
        "capabilities": caps,
        "pairing": Gate::new(ctx.agent_pairing, asks).describe(),
    });
    if let Err(e) = crate::files::write_atomically(&dir.client(), record.to_string().as_bytes()) {
        tracing::warn!("writing client.json: {e}");
    }
}

#[cfg(test)]
#[path = "consent_tests.rs"]
mod tests;

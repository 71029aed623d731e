//! The claim tool, `claim`: claims files of this session's repository, releases them,
//! or asks who holds them (docs/CLAIMS.md). One tool for the three, like `group`.

use interlink_core::claims::{
    Board, Claim, DEFAULT_CLAIM_LIFETIME_MS, MAX_CLAIM_LIFETIME_MS, MAX_CLAIMS_PER_SESSION,
    Pattern, Standing, check_set,
};
use rmcp::{handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    claims::{self as session_claims, standing_text},
    context::{Context, ToolError},
    policy,
    project::Project,
    render::Names,
    server::Server,
};

/// Arguments of `claim`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimArgs {
    /// Files, directories or globs (* ? **), relative to cwd or absolute.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Release these (all if no paths).
    #[serde(default)]
    pub release: bool,
    /// Only say who holds these (or all claims if no paths).
    #[serde(default)]
    pub check: bool,
    /// Others may claim too.
    #[serde(default)]
    pub shared: bool,
    pub reason: Option<String>,
    /// Default 120.
    pub minutes: Option<u64>,
}

#[tool_router(router = claims_router, vis = "pub(crate)")]
impl Server {
    /// Claim files of this repository before editing them, so other sessions (yours or
    /// peers') leave them alone; release when done; check: who holds what.
    #[tool]
    async fn claim(&self, Parameters(args): Parameters<ClaimArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        match claim(ctx, args).await {
            Ok((text, value)) => ctx.ok(text, value),
            Err(e) => ctx.error(e),
        }
    }
}

async fn claim(ctx: &Context, args: ClaimArgs) -> Result<(String, Value), ToolError> {
    if args.release && args.check {
        return Err(ToolError("give release or check, not both".into()));
    }
    let cwd = ctx.shared().cwd.clone();
    let project = ctx.shared().claims.project(&cwd).ok_or_else(|| {
        ToolError(format!(
            "{cwd} is not in a git repository: claims are on a repository's files, shared \
             with the sessions working on the same repository"
        ))
    })?;
    let patterns = args
        .paths
        .iter()
        .map(|p| session_claims::resolve(&project.root, &cwd, p).map_err(ToolError))
        .collect::<Result<Vec<_>, _>>()?;
    let own = ctx.own()?;
    let dir = ctx.session_dir()?;
    let now = ctx.clock.now_ms();
    let mut mine: Vec<Claim> = interlink_store::claims::load_own(&dir)
        .map_err(ToolError)?
        .into_iter()
        .filter(|c| c.until > now)
        .collect();
    let policy = policy::load(&ctx.home)?;
    let names = Names::new(&policy, &own.key);

    if args.check {
        let board = board(ctx, &project, &own, mine, now).await?;
        return Ok(check(&board, &patterns, &own, &names, &project));
    }
    let before = mine.len();
    if args.release {
        mine.retain(|c| !patterns.is_empty() && !patterns.contains(&c.pattern));
    } else {
        if patterns.is_empty() {
            return Err(ToolError(
                "name the paths to claim (or check: true to see the project's claims)".into(),
            ));
        }
        let lifetime = args
            .minutes
            .map_or(DEFAULT_CLAIM_LIFETIME_MS, |m| m.saturating_mul(60_000))
            .clamp(60_000, MAX_CLAIM_LIFETIME_MS);
        for pattern in &patterns {
            let claim = Claim {
                pattern: pattern.clone(),
                exclusive: !args.shared,
                reason: args.reason.clone().unwrap_or_default(),
                since: now,
                until: now + lifetime,
            };
            match mine.iter_mut().find(|c| &c.pattern == pattern) {
                // Renewed: the same claim, so it keeps its place.
                Some(c) => {
                    *c = Claim {
                        since: c.since,
                        ..claim
                    }
                }
                None => mine.push(claim),
            }
        }
        if mine.len() > MAX_CLAIMS_PER_SESSION {
            return Err(ToolError(format!(
                "a session holds at most {MAX_CLAIMS_PER_SESSION} claims: release some \
                 (release: true) or claim a directory or glob that covers several"
            )));
        }
        check_set(&mine, now)?;
    }
    interlink_store::claims::save_own(&dir, &mine)
        .map_err(|e| ToolError(format!("the claims could not be saved: {e}")))?;
    ctx.ready().await?.handle.set_claims(mine.clone()).await?;
    let board = board(ctx, &project, &own, mine, now).await?;
    // What this result says, the agent need not be told again.
    ctx.shared()
        .claims
        .note_conflicts(&board, &own, &names, false);
    // The hooks and the guard see the change now, not at the worker's next look.
    let view = session_claims::view_of(&board, &project, &own, &names, now);
    let written =
        tokio::task::spawn_blocking(move || interlink_store::claims::write_board(&dir, &view))
            .await;
    if let Ok(Err(e)) = written {
        tracing::warn!("writing the claims board: {e}");
    }
    let standings: Vec<_> = board.standings_of(&own).collect();
    let mut text = if args.release {
        format!(
            "released {} claim(s)",
            before.saturating_sub(standings.len())
        )
    } else {
        "claimed".to_owned()
    };
    if standings.is_empty() {
        text.push_str("; this session claims nothing now");
    }
    for (p, s) in &standings {
        text.push_str(&format!("\n  {}", standing_text(p, s, &names)));
    }
    if standings.iter().any(|(_, s)| *s != Standing::Held) {
        text.push_str(
            "\nA waiting claim holds by itself when the one before it ends: leave those files \
             alone until then, or ask its session (send_message).",
        );
    }
    let list: Vec<Value> = standings
        .iter()
        .map(|(p, s)| claim_json(p, s, &names))
        .collect();
    Ok((
        text,
        json!({ "project": project.id.to_hex(), "claims": list }),
    ))
}

/// The project's claims now, for `whoami` and `discover`: `None` outside a repository
/// or before the node is up. Text lines (`prefix` before each) and their JSON.
pub(crate) async fn project_claims(ctx: &Context, prefix: &str) -> Option<(String, Value)> {
    let cwd = ctx.shared().cwd.clone();
    let project = ctx.shared().claims.project(&cwd)?;
    let own = ctx.own().ok()?;
    let dir = ctx.session_dir().ok()?;
    let now = ctx.clock.now_ms();
    let mine: Vec<Claim> = interlink_store::claims::load_own(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.until > now)
        .collect();
    let board = board(ctx, &project, &own, mine, now).await.ok()?;
    let policy = policy::load(&ctx.home).unwrap_or_default();
    let names = Names::new(&policy, &own.key);
    let mut text = String::new();
    let mut list = Vec::new();
    for (p, s) in board.claims() {
        let mine = if p.by == own { " (this session)" } else { "" };
        text.push_str(&format!(
            "{prefix}{}{mine}: {}\n",
            session_claims::who(p, &names),
            standing_text(p, &s, &names)
        ));
        list.push(claim_json(p, &s, &names));
    }
    Some((
        text,
        json!({ "project": project.id.to_hex(), "root": project.root, "claims": list }),
    ))
}

async fn board(
    ctx: &Context,
    project: &Project,
    own: &interlink_core::wire::SessionAddr,
    mine: Vec<Claim>,
    now: u64,
) -> Result<Board, ToolError> {
    let roster = ctx.roster().await?;
    Ok(session_claims::board_of(
        &roster,
        &project.id,
        own,
        mine,
        now,
    ))
}

fn check(
    board: &Board,
    patterns: &[String],
    own: &interlink_core::wire::SessionAddr,
    names: &Names<'_>,
    project: &Project,
) -> (String, Value) {
    let parsed: Vec<Pattern> = patterns
        .iter()
        .filter_map(|p| Pattern::parse(p).ok())
        .collect();
    let shown: Vec<_> = board
        .claims()
        .filter(|(p, _)| parsed.is_empty() || parsed.iter().any(|q| q.overlaps(p.pattern())))
        .collect();
    let mut text = if shown.is_empty() {
        if parsed.is_empty() {
            "no claims in this repository".to_owned()
        } else {
            "nobody claims these: free to edit".to_owned()
        }
    } else {
        "claims in this repository:".to_owned()
    };
    for (p, s) in &shown {
        let mine = if &p.by == own { " (this session)" } else { "" };
        text.push_str(&format!(
            "\n  {}{mine}: {}",
            session_claims::who(p, names),
            standing_text(p, s, names)
        ));
    }
    let list: Vec<Value> = shown.iter().map(|(p, s)| claim_json(p, s, names)).collect();
    (
        text,
        json!({ "project": project.id.to_hex(), "claims": list }),
    )
}

fn claim_json(p: &interlink_core::claims::Placed, s: &Standing, names: &Names<'_>) -> Value {
    let by = |p: &interlink_core::claims::Placed| {
        json!({
            "identity_key": p.by.key.to_hex(),
            "petname": names.of(&p.by.key),
            "session": p.by.session.to_string(),
        })
    };
    json!({
        "by": by(p),
        "pattern": p.pattern().to_string(),
        "exclusive": p.claim.exclusive,
        "reason": p.claim.reason,
        "since": p.claim.since,
        "until": p.claim.until,
        "held": *s == Standing::Held,
        "waits_behind": match s {
            Standing::Held => Value::Null,
            Standing::Waits(first) => json!({
                "by": by(first),
                "pattern": first.pattern().to_string(),
                "exclusive": first.claim.exclusive,
                "reason": first.claim.reason,
                "since": first.claim.since,
            }),
        },
    })
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;

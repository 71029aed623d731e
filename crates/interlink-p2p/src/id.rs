//! `interlink-p2p id`: this user's identity, created on first use, and the name it
//! offers peers.

use interlink_store::paths::Home;

/// Create this user's identity if missing; print its key and fingerprint.
#[derive(Debug, clap::Args)]
#[command(
    alias = "whoami",
    after_help = "Examples:\n  interlink-p2p id\n  interlink-p2p id --name alice"
)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Set the name this user suggests to peers when pairing (written to the
    /// settings file, config.toml in the home) [default: INTERLINK_NAME, else <login>-<host>]
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
}

/// `interlink-p2p id`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    println!(
        "{}",
        describe(&ctx.home()?, args.json, args.name.as_deref())?
    );
    Ok(std::process::ExitCode::SUCCESS)
}

/// Creates the identity if missing and describes it.
pub fn describe(home: &Home, json: bool, set_name: Option<&str>) -> anyhow::Result<String> {
    let (identity, created) = crate::load_identity(home)?;
    let key = identity.public();
    let path = home.identity();
    // The name peers are offered when this user knocks or accepts, kept in the
    // settings file so every session reads it.
    if let Some(name) = set_name {
        anyhow::ensure!(
            interlink_core::wire::is_valid_name(name),
            "invalid name {name:?}: use 1-32 characters from A-Z a-z 0-9 . _ -"
        );
        crate::settings::write(
            home.path(),
            &[("name", Some(toml_edit::value(name)))],
            false,
        )?;
    }
    let env = crate::settings::Settings::load(home.path())?;
    let name = interlink_store::pairing::own_name(env.layered(|k| std::env::var(k).ok()));
    Ok(if json {
        serde_json::json!({
            "identity_key": key.to_hex(),
            "fingerprint": key.fingerprint().to_string(),
            "key_file": path,
            "created": created,
            "name": name,
        })
        .to_string()
    } else {
        format!(
            "identity    {}\nfingerprint {}\nname        {name}\nkey file    {}{}",
            key.to_hex(),
            key.fingerprint(),
            path.display(),
            if created { " (created)" } else { "" }
        )
    })
}

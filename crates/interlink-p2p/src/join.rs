//! `interlink-p2p join`: the other side of an invite code ([`crate::invite::join`]),
//! or of a device code ([`crate::device::join_device`]).

/// Pair with the person whose invite code you were given, or take your identity
/// from your other machine with a device code (`invite --device`).
///
/// Verifies the code (its check and the inviter's signature), knocks with its
/// secret and waits for their side to confirm; only then adds them to your peers
/// and keeps the relays they signed into the code in your settings file. A device
/// code (interlink3…) instead shows a comparison string to confirm on both
/// machines, then writes the identity.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p join interlink2…\n  interlink-p2p \
                        join interlink2… --name alice-laptop\n  interlink-p2p join \
                        interlink3…   (a device code from `invite --device`)\n\nExit \
                        status: 0 when confirmed; 1 when the code is refused (nothing \
                        changed) or no confirmation came within --wait."
)]
pub struct Args {
    /// The code (starts with interlink2, or interlink3 for a device code).
    code: String,
    /// The name to give them here [default: the name in the code]
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Longest wait for them to show on the overlay, then for the confirmation, in
    /// seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    wait: f64,
    /// Device codes: confirm the comparison string here without asking (the
    /// identity received is still checked against the code's signed key; the other
    /// machine's user must still confirm).
    #[arg(long)]
    yes: bool,
    /// Device codes: replace this home's identity if it has another one (the old
    /// key is kept next to it as a backup).
    #[arg(long)]
    replace_identity: bool,
    #[command(flatten)]
    net: crate::config::NetArgs,
}

/// `interlink-p2p join`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let config = args.net.config(&ctx.settings)?;
    let home = ctx.home()?;
    let (mut out, mut progress) = (std::io::stdout(), std::io::stderr());
    let done = if interlink_core::wire::DeviceCode::is_device_code(&args.code) {
        if args.name.is_some() {
            return Err(crate::UsageError(
                "--name is for a person's invite; a device code brings your own identity".into(),
            )
            .into());
        }
        let options = crate::device::JoinDeviceOptions {
            code: args.code,
            yes: args.yes,
            replace_identity: args.replace_identity,
        };
        crate::ctx::runtime()?.block_on(crate::device::join_device(
            &home,
            &config,
            &options,
            &mut out,
            &mut progress,
        ))?
    } else {
        if args.yes || args.replace_identity {
            return Err(crate::UsageError(
                "--yes and --replace-identity are for a device code (interlink3…) from \
                 `invite --device`"
                    .into(),
            )
            .into());
        }
        let options = crate::invite::JoinOptions {
            code: args.code,
            petname: args.name,
            wait: crate::ctx::seconds("--wait", args.wait)?,
            name: ctx.own_name(),
        };
        crate::ctx::runtime()?.block_on(crate::invite::join(
            &home,
            config,
            &options,
            &mut out,
            &mut progress,
        ))?
    };
    Ok(crate::ctx::finished(done))
}

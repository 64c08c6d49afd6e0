//! `droidmesh keys new` (an API key for the gateway and its keys file entry) and `droidmesh
//! tls dev-certs` (a private CA and a certificate to try TLS with).
use anyhow::{Context, Result};
use std::path::PathBuf;

use crate::output::say;

#[derive(Debug, clap::Args)]
pub struct KeyArgs {
    /// The tenant the key acts for: it sees and controls only that tenant's tasks.
    #[arg(long)]
    tenant: String,
    /// A device the key may use (repeat for several); none: every device.
    #[arg(long = "device", value_name = "SERIAL")]
    devices: Vec<String>,
    /// A secret id the key's tasks may name in `secret_ids` (repeat for several; ids are
    /// case-insensitive); none: no secret.
    #[arg(long = "secret", value_name = "ID")]
    secrets: Vec<String>,
    /// Refuse the key after this long (e.g. `90days`); none: it does not expire.
    #[arg(long)]
    expires_in: Option<humantime::Duration>,
}

#[derive(Debug, clap::Args)]
pub struct TlsDevCertsArgs {
    /// The folder to write to.
    dir: PathBuf,
    /// A DNS name or address the certificate is good for (repeat for several); none:
    /// localhost, 127.0.0.1 and ::1.
    #[arg(long = "host", value_name = "NAME")]
    hosts: Vec<String>,
    /// The certificate's file name, without extension.
    #[arg(long, default_value = "tls")]
    name: String,
    /// Days the certificates are valid.
    #[arg(long, default_value_t = 365)]
    days: u32,
}

/// Prints a fresh key once and the keys file entry that holds its hash.
pub fn keys_new(args: KeyArgs) -> Result<()> {
    let KeyArgs {
        tenant,
        devices,
        secrets,
        expires_in,
    } = args;
    let expires_unix = match expires_in {
        None => None,
        Some(d) => Some(
            std::time::SystemTime::now()
                .checked_add(*d)
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .context("--expires-in is too far in the future")?
                .as_secs(),
        ),
    };
    let key = droidmesh_gateway::auth::new_key();
    let entry = droidmesh_gateway::auth::key_entry(&key, &tenant, &devices, &secrets, expires_unix)
        .map_err(|e| anyhow::anyhow!("cannot make a key: {e}"))?;
    say!("key (shown once; give it to the client, it is not stored anywhere):\n  {key}\n");
    say!("add to the keys file (gateway.auth.keys_file); it holds only the key's hash:\n\n{entry}");
    say!("clients send it as the header `authorization: Bearer <key>`");
    Ok(())
}

/// Writes a CA (or reuses the folder's) and a certificate it signs, and prints the `[tls]`
/// section that uses them.
pub fn tls_dev_certs(args: TlsDevCertsArgs) -> Result<()> {
    let TlsDevCertsArgs {
        dir,
        hosts,
        name,
        days,
    } = args;
    let hosts = if hosts.is_empty() {
        droidmesh_runtime::tls::dev::local_names()
    } else {
        hosts
    };
    let files = droidmesh_runtime::tls::dev::write_dev_certs(&dir, &name, &hosts, days)
        .context("cannot write the certificates")?;
    if files.new_ca {
        say!(
            "wrote a new CA: {} (its key {}: keep it private)",
            files.ca.display(),
            files.ca_key.display()
        );
    } else {
        say!("signed with the CA in {}", files.ca.display());
    }
    say!(
        "wrote {} and {} for {}, valid {days} days\n\n[tls]\ncert = {:?}\nkey = {:?}\nca = {:?}\nmutual = true",
        files.cert.display(),
        files.key.display(),
        hosts.join(", "),
        files.cert.display().to_string(),
        files.key.display().to_string(),
        files.ca.display().to_string()
    );
    Ok(())
}

//! `runtime-cloud login`: the server and token the other commands use, saved in a file only
//! its owner can read.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What `login` saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    /// The API.
    pub server: String,
    /// The bearer token.
    pub token: String,
}

/// The file: `RUNTIME_CLOUD_CLI_CONFIG`, else `$XDG_CONFIG_HOME/runtime-cloud/cli.toml`, else
/// `~/.config/runtime-cloud/cli.toml`.
pub fn path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RUNTIME_CLOUD_CLI_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("runtime-cloud").join("cli.toml"))
}

impl Saved {
    /// The saved login, if there is one.
    pub fn load() -> Result<Option<Saved>, String> {
        let Some(path) = path() else { return Ok(None) };
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Writes the file, readable by its owner only (it holds a bearer token); returns where.
    pub fn save(&self) -> Result<PathBuf, String> {
        let path = path().ok_or("no HOME: set RUNTIME_CLOUD_CLI_CONFIG")?;
        let failed = |e: std::io::Error| format!("{}: {e}", path.display());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let text = toml::to_string(self).map_err(|e| e.to_string())?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).map_err(failed)?;
        // An existing file keeps its mode through `open`: narrow it too.
        #[cfg(unix)]
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .map_err(failed)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(failed)?;
        Ok(path)
    }
}

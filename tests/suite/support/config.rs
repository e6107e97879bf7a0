//! The user's configuration in a test's isolated home.

use super::TestRepo;

/// Writes `text` as the user config of `repo`'s isolated home
/// (`$XDG_CONFIG_HOME/ahelper/config.toml`).
pub fn write_user_config(repo: &TestRepo, text: &str) {
    let dir = repo.home().join("config/ahelper");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

//! What the names a store command is given stand for: files, prefixes (`photos` for every
//! `photos:...`) and patterns, resolved through the session; and store names as local
//! paths.

use flashpipe_api::TransportExt;
use flashpipe_fs::FileStat;
use flashpipe_store::glob;

use crate::error_kind::Failure;
use crate::session::{file_exists, SessionResult, StoreTransport};

/// The local path components of a store name (its `:`-separated parts), each checked to
/// be a plain file or folder name: never empty, `.`, `..`, nor holding `/` or NUL.
pub fn local_components(name: &str) -> Result<Vec<&str>, Box<dyn std::error::Error>> {
    let components: Vec<&str> = name.split(':').collect();
    for component in &components {
        if component.is_empty()
            || *component == "."
            || *component == ".."
            || component.contains(['/', '\0'])
        {
            return Err(Failure::invalid_input(format!(
                "store name {name:?} cannot be a local path: component {component:?} is empty, `.`, `..` or holds `/`; rename it with `flashpipe mv` or fetch it with `get NAME FILE`"
            ))
            .into());
        }
    }
    Ok(components)
}

/// The store files that `run`'s input names and patterns stand for (a prefix is not
/// expanded: a kernel's inputs are named or matched).
pub fn resolve_input_names<T: StoreTransport>(
    client: &mut T,
    arguments: &[String],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    resolve_names(client, arguments, FolderRule::Refuse)
}

/// Whether a name that is no file but a prefix of files (`photos` for `photos:a.jpg`)
/// stands for those files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FolderRule {
    /// It does (`ls`, `rm -r`, `get -r`).
    Expand,
    /// It does not: the command says so and names -r.
    Refuse,
}

/// The store files `arguments` name, in order, each once: a pattern stands for the files
/// it matches (none is an error naming it, unless a file has the pattern's very name: then
/// that file), a name of a file for that file, and a prefix for the files under it when
/// `folders` allows.
pub(super) fn resolve_names<T: StoreTransport>(
    client: &mut T,
    arguments: &[String],
    folders: FolderRule,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut all_names: Option<Vec<String>> = None;
    let mut resolved = Vec::new();
    for argument in arguments {
        if !glob::is_pattern(argument) && file_exists(client, argument)? {
            resolved.push(argument.clone());
            continue;
        }
        let names = match &all_names {
            Some(names) => names,
            None => all_names.insert(
                list_files(client, &[])?
                    .into_iter()
                    .map(|file| file.name)
                    .collect(),
            ),
        };
        if glob::is_pattern(argument) {
            let matching: Vec<String> = names
                .iter()
                .filter(|name| glob::matches(argument, name))
                .cloned()
                .collect();
            if matching.is_empty() {
                if file_exists(client, argument)? {
                    resolved.push(argument.clone());
                    continue;
                }
                return Err(Failure::no_match(format!(
                    "pattern {argument:?} matches no file in the store"
                ))
                .into());
            }
            resolved.extend(matching);
            continue;
        }
        let prefix = format!("{}:", argument.trim_end_matches(':'));
        let under: Vec<String> = names
            .iter()
            .filter(|name| name.starts_with(&prefix))
            .cloned()
            .collect();
        if under.is_empty() {
            client.stat(argument).session()?;
            return Err(
                Failure::not_found(format!("{argument:?}: no such file in the store")).into(),
            );
        }
        if folders == FolderRule::Refuse {
            return Err(Failure::invalid_input(format!(
                "{argument:?} is no file but the prefix of {} file(s); give -r for all of them",
                under.len()
            ))
            .into());
        }
        resolved.extend(under);
    }
    let mut seen = std::collections::HashSet::new();
    resolved.retain(|name| seen.insert(name.clone()));
    Ok(resolved)
}

pub(super) fn list_files<T: StoreTransport>(
    client: &mut T,
    names: &[String],
) -> Result<Vec<FileStat>, Box<dyn std::error::Error>> {
    if names.is_empty() {
        return Ok(client.list().session()?);
    }
    names
        .iter()
        .map(|name| client.stat(name).session().map_err(Into::into))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_names_become_safe_local_components() {
        assert_eq!(local_components("a:b:c").unwrap(), ["a", "b", "c"]);
        for unsafe_name in ["a::b", "a:..:b", ":a", "a:.", "a/b:c", "..", "a:"] {
            assert!(local_components(unsafe_name).is_err(), "{unsafe_name}");
        }
    }
}

//! The mount's picture of the store's flat names as a tree: a name `a:b:c` is the file `c`
//! in the directory `b` of the directory `a`; a directory exists while a file lies under it
//! or while its marker (`a:b:.flashpipe-dir`, an empty store file) does. Inode numbers are
//! the mount's own, given out once per mount and never reused while it runs.
//!
//! Store names that no path can show (an empty component, `.`, `..`, or a file whose name
//! is also a directory's) are left out of the tree and counted as hidden; nothing here
//! changes the store: the caller sends the commands and then updates the tree.

use std::collections::{BTreeMap, HashMap};

use flashpipe_api::{FileOwner, FileStat};

/// The root directory's inode number (FUSE's).
pub const ROOT_INODE: u64 = 1;

/// The last component of a directory's marker: `a:b:.flashpipe-dir` keeps `a/b`. The
/// mount neither shows nor lets anyone create a file of this name.
pub const DIRECTORY_MARKER: &str = ".flashpipe-dir";

/// What separates a store name's components (one directory level each).
pub const SEPARATOR: char = ':';

/// The longest store name, in bytes (docs/format.md, name table).
pub const MAX_NAME_BYTES: usize = 255;

/// A file's or directory's node.
#[derive(Debug, Clone)]
pub struct Node {
    /// The directory holding it (the root holds itself).
    pub parent: u64,
    /// Its component (empty for the root).
    pub name: String,
    /// A file or a directory.
    pub kind: NodeKind,
    /// What chmod, chown and utimens stored: a file's own, a directory's on its marker.
    pub stored: Stored,
}

/// The attributes a user set and the store keeps (each `None` when never set: the mount
/// shows its default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    /// Permission bits (`0o7777` at most; the mount itself sets no setuid, setgid or
    /// sticky bit).
    pub mode: Option<u32>,
    /// Owner ids.
    pub owner: Option<FileOwner>,
    /// Modification time, ns since the Unix epoch.
    pub modified_wall_ns: Option<i64>,
}

impl Stored {
    /// What the store says of `file`.
    pub fn of(file: &FileStat) -> Stored {
        Stored {
            mode: file.mode,
            owner: file.owner,
            modified_wall_ns: file.modified_wall_ns,
        }
    }
}

/// A file's facts or a directory's entries.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// A file of the store.
    File {
        /// Its length as last seen or written.
        size_bytes: u64,
        /// Its last change, ns since the epoch (or the mount's start on virtual clocks).
        modified_ns: u64,
    },
    /// A directory.
    Directory {
        /// Entries by component.
        children: BTreeMap<String, u64>,
        /// Whether the store holds its marker.
        marker: bool,
    },
}

/// One store file as the tree takes it: its name, size and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreEntry {
    /// The store name.
    pub name: String,
    /// Its length.
    pub size_bytes: u64,
    /// Its last change, ns since the epoch.
    pub modified_ns: u64,
    /// What a user set of its attributes.
    pub stored: Stored,
}

/// Why a path component cannot become part of a store name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentRefusal {
    /// It holds the separator `:` (the store would read it as two levels).
    HoldsSeparator,
    /// It is the marker's name, reserved.
    Reserved,
    /// It is not UTF-8.
    NotUtf8,
    /// The whole store name would pass 255 bytes.
    TooLong,
}

/// The mount's tree of names.
#[derive(Debug)]
pub struct Tree {
    nodes: HashMap<u64, Node>,
    next_inode: u64,
    hidden: Vec<String>,
    /// Directories directly inside each directory that has any (a directory's link count
    /// is 2 plus these, asked at every getattr: counted as entries come and go).
    subdirectories: HashMap<u64, u32>,
}

/// The components of a store name as a path, and whether it is a directory's marker;
/// `None` when no path can show it.
fn path_of(name: &str) -> Option<(Vec<&str>, bool)> {
    let mut components: Vec<&str> = name.split(SEPARATOR).collect();
    let marker = components.len() > 1 && components.last() == Some(&DIRECTORY_MARKER);
    if marker {
        components.pop();
    }
    let plain = components
        .iter()
        .all(|component| !component.is_empty() && *component != "." && *component != "..");
    let reserved = !marker && components.last() == Some(&DIRECTORY_MARKER);
    (plain && !reserved).then_some((components, marker))
}

impl Tree {
    /// A tree of the store's files (`entries`), with directories from their names.
    pub fn new(entries: &[StoreEntry]) -> Tree {
        let mut tree = Tree {
            nodes: HashMap::new(),
            next_inode: ROOT_INODE + 1,
            hidden: Vec::new(),
            subdirectories: HashMap::new(),
        };
        tree.nodes.insert(
            ROOT_INODE,
            Node {
                parent: ROOT_INODE,
                name: String::new(),
                kind: NodeKind::Directory {
                    children: BTreeMap::new(),
                    marker: false,
                },
                stored: Stored::default(),
            },
        );
        // deeper names first, so that a file whose name is also a directory's is the one
        // left out
        let mut sorted: Vec<&StoreEntry> = entries.iter().collect();
        sorted.sort_by_key(|entry| std::cmp::Reverse(entry.name.split(SEPARATOR).count()));
        for entry in sorted {
            tree.insert_entry(entry);
        }
        tree
    }

    fn insert_entry(&mut self, entry: &StoreEntry) {
        let Some((components, marker)) = path_of(&entry.name) else {
            self.hidden.push(entry.name.clone());
            return;
        };
        let (last, folders) = components.split_last().expect("a name has a component");
        let mut directory = ROOT_INODE;
        for component in folders {
            match self.ensure_directory(directory, component) {
                Some(inode) => directory = inode,
                None => {
                    self.hidden.push(entry.name.clone());
                    return;
                }
            }
        }
        if marker {
            match self.ensure_directory(directory, last) {
                Some(inode) => {
                    self.set_marker(inode, true);
                    self.set_stored(inode, entry.stored);
                }
                None => self.hidden.push(entry.name.clone()),
            }
            return;
        }
        if self.child(directory, last).is_some() {
            self.hidden.push(entry.name.clone());
            return;
        }
        let inode = self.add(
            directory,
            last,
            NodeKind::File {
                size_bytes: entry.size_bytes,
                modified_ns: entry.modified_ns,
            },
        );
        self.set_stored(inode, entry.stored);
    }

    /// Records what the store keeps of `inode`'s attributes.
    pub fn set_stored(&mut self, inode: u64, stored: Stored) {
        if let Some(node) = self.nodes.get_mut(&inode) {
            node.stored = stored;
        }
    }

    /// The directory `name` in `parent`, made when missing; `None` when a file has the name.
    fn ensure_directory(&mut self, parent: u64, name: &str) -> Option<u64> {
        match self.child(parent, name) {
            Some(inode) => self.is_directory(inode).then_some(inode),
            None => Some(self.add(
                parent,
                name,
                NodeKind::Directory {
                    children: BTreeMap::new(),
                    marker: false,
                },
            )),
        }
    }

    /// Store names no path shows (empty components, `.`, `..`, a file named as a directory).
    pub fn hidden(&self) -> &[String] {
        &self.hidden
    }

    /// The node of `inode`.
    pub fn node(&self, inode: u64) -> Option<&Node> {
        self.nodes.get(&inode)
    }

    /// The node of `inode`, to change.
    pub fn node_mut(&mut self, inode: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&inode)
    }

    /// Whether `inode` is a directory.
    pub fn is_directory(&self, inode: u64) -> bool {
        matches!(
            self.nodes.get(&inode).map(|node| &node.kind),
            Some(NodeKind::Directory { .. })
        )
    }

    /// The entry `name` of directory `parent`.
    pub fn child(&self, parent: u64, name: &str) -> Option<u64> {
        match &self.nodes.get(&parent)?.kind {
            NodeKind::Directory { children, .. } => children.get(name).copied(),
            NodeKind::File { .. } => None,
        }
    }

    /// Whether directory `inode` has entries (false for a file or an unknown inode).
    pub fn has_children(&self, inode: u64) -> bool {
        matches!(
            self.nodes.get(&inode).map(|node| &node.kind),
            Some(NodeKind::Directory { children, .. }) if !children.is_empty()
        )
    }

    /// The entries of directory `inode`, in name order, borrowed (none for a file).
    pub fn children_iter(&self, inode: u64) -> impl Iterator<Item = (&str, u64)> + '_ {
        let children = match self.nodes.get(&inode).map(|node| &node.kind) {
            Some(NodeKind::Directory { children, .. }) => Some(children),
            _ => None,
        };
        children
            .into_iter()
            .flat_map(|children| children.iter().map(|(name, inode)| (name.as_str(), *inode)))
    }

    /// The entries of directory `inode`, in name order.
    pub fn children(&self, inode: u64) -> Vec<(String, u64)> {
        match self.nodes.get(&inode).map(|node| &node.kind) {
            Some(NodeKind::Directory { children, .. }) => children
                .iter()
                .map(|(name, inode)| (name.clone(), *inode))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether directory `inode` has its marker in the store.
    pub fn has_marker(&self, inode: u64) -> bool {
        matches!(
            self.nodes.get(&inode).map(|node| &node.kind),
            Some(NodeKind::Directory { marker: true, .. })
        )
    }

    /// Records whether directory `inode` has its marker.
    pub fn set_marker(&mut self, inode: u64, present: bool) {
        if let Some(Node {
            kind: NodeKind::Directory { marker, .. },
            ..
        }) = self.nodes.get_mut(&inode)
        {
            *marker = present;
        }
    }

    /// Adds `name` to directory `parent`; its new inode number.
    pub fn add(&mut self, parent: u64, name: &str, kind: NodeKind) -> u64 {
        assert!(
            self.is_directory(parent),
            "entries are added to directories"
        );
        let inode = self.next_inode;
        self.next_inode += 1;
        self.nodes.insert(
            inode,
            Node {
                parent,
                name: name.to_string(),
                kind,
                stored: Stored::default(),
            },
        );
        if let Some(Node {
            kind: NodeKind::Directory { children, .. },
            ..
        }) = self.nodes.get_mut(&parent)
        {
            let previous = children.insert(name.to_string(), inode);
            assert!(previous.is_none(), "a name is added once");
        }
        if self.is_directory(inode) {
            self.count_subdirectory(parent, true);
        }
        inode
    }

    /// Counts a directory in or out of `parent`'s subdirectories.
    fn count_subdirectory(&mut self, parent: u64, added: bool) {
        let count = self.subdirectories.entry(parent).or_insert(0);
        if added {
            *count += 1;
        } else {
            assert!(*count > 0, "a directory counted in is counted out once");
            *count -= 1;
            if *count == 0 {
                self.subdirectories.remove(&parent);
            }
        }
    }

    /// Directories directly inside `inode`.
    pub fn subdirectory_count(&self, inode: u64) -> u32 {
        self.subdirectories.get(&inode).copied().unwrap_or(0)
    }

    /// Removes `inode` and everything under it from the tree.
    pub fn remove(&mut self, inode: u64) {
        assert_ne!(inode, ROOT_INODE, "the root stays");
        let Some(node) = self.nodes.remove(&inode) else {
            return;
        };
        if let Some(Node {
            kind: NodeKind::Directory { children, .. },
            ..
        }) = self.nodes.get_mut(&node.parent)
        {
            children.remove(&node.name);
        }
        if let NodeKind::Directory { children, .. } = node.kind {
            self.count_subdirectory(node.parent, false);
            self.subdirectories.remove(&inode);
            for child in children.into_values() {
                self.remove_detached(child);
            }
        }
    }

    fn remove_detached(&mut self, inode: u64) {
        if let Some(node) = self.nodes.remove(&inode) {
            self.subdirectories.remove(&inode);
            if let NodeKind::Directory { children, .. } = node.kind {
                for child in children.into_values() {
                    self.remove_detached(child);
                }
            }
        }
    }

    /// Moves `inode` to `new_parent` as `new_name` (the target name must be free).
    pub fn rename(&mut self, inode: u64, new_parent: u64, new_name: &str) {
        let old = self.nodes.get(&inode).expect("a node that exists is moved");
        let (old_parent, old_name) = (old.parent, old.name.clone());
        if let Some(Node {
            kind: NodeKind::Directory { children, .. },
            ..
        }) = self.nodes.get_mut(&old_parent)
        {
            children.remove(&old_name);
        }
        if let Some(Node {
            kind: NodeKind::Directory { children, .. },
            ..
        }) = self.nodes.get_mut(&new_parent)
        {
            let previous = children.insert(new_name.to_string(), inode);
            assert!(previous.is_none(), "a rename's target is free");
        }
        let node = self.nodes.get_mut(&inode).expect("checked above");
        node.parent = new_parent;
        node.name = new_name.to_string();
        if self.is_directory(inode) {
            self.count_subdirectory(old_parent, false);
            self.count_subdirectory(new_parent, true);
        }
    }

    /// The components from the root to `inode`.
    fn components(&self, mut inode: u64) -> Vec<&str> {
        let mut components = Vec::new();
        while inode != ROOT_INODE {
            let node = &self.nodes[&inode];
            components.push(node.name.as_str());
            inode = node.parent;
        }
        components.reverse();
        components
    }

    /// The store name of file `inode`, or of the entry `name` in directory `inode`.
    pub fn store_name(&self, inode: u64, name: Option<&str>) -> String {
        let mut components = self.components(inode);
        components.extend(name);
        components.join(&SEPARATOR.to_string())
    }

    /// The store name of directory `inode`'s marker.
    pub fn marker_name(&self, inode: u64) -> String {
        self.store_name(inode, Some(DIRECTORY_MARKER))
    }

    /// Every store name at or under `inode`: its files and the markers of its directories.
    pub fn store_names_under(&self, inode: u64) -> Vec<String> {
        let mut names = Vec::new();
        self.collect_names(inode, &mut names);
        names
    }

    fn collect_names(&self, inode: u64, names: &mut Vec<String>) {
        match &self.nodes[&inode].kind {
            NodeKind::File { .. } => names.push(self.store_name(inode, None)),
            NodeKind::Directory { children, marker } => {
                if *marker {
                    names.push(self.marker_name(inode));
                }
                for child in children.values() {
                    self.collect_names(*child, names);
                }
            }
        }
    }

    /// Whether `ancestor` is `inode` or holds it, at any depth.
    pub fn is_within(&self, mut inode: u64, ancestor: u64) -> bool {
        loop {
            if inode == ancestor {
                return true;
            }
            if inode == ROOT_INODE {
                return false;
            }
            match self.nodes.get(&inode) {
                Some(node) => inode = node.parent,
                None => return false,
            }
        }
    }

    /// Brings directory `inode`'s entries in line with `fresh` (a tree of the store's names
    /// now, other clients' changes included): entries gone are removed, new ones added,
    /// files' sizes and times and the directory's marker updated; inode numbers of entries
    /// still there are kept.
    pub fn refresh_directory(&mut self, inode: u64, fresh: &Tree) {
        let mut there = ROOT_INODE;
        for component in self.components(inode) {
            match fresh.child(there, component) {
                Some(next) if fresh.is_directory(next) => there = next,
                _ => return,
            }
        }
        let marker = fresh.has_marker(there);
        self.set_marker(inode, marker);
        self.set_stored(inode, fresh.nodes[&there].stored);
        let now: BTreeMap<String, u64> = fresh.children(there).into_iter().collect();
        for (name, child) in self.children(inode) {
            let keep = match now.get(&name) {
                Some(&other) => fresh.is_directory(other) == self.is_directory(child),
                None => false,
            };
            if !keep {
                self.remove(child);
            }
        }
        for (name, other) in now {
            let kind = fresh.nodes[&other].kind.clone();
            let stored = fresh.nodes[&other].stored;
            match self.child(inode, &name) {
                Some(child) => {
                    self.set_stored(child, stored);
                    if let (
                        NodeKind::File {
                            size_bytes,
                            modified_ns,
                        },
                        Some(node),
                    ) = (kind, self.nodes.get_mut(&child))
                    {
                        node.kind = NodeKind::File {
                            size_bytes,
                            modified_ns,
                        };
                    }
                }
                None => {
                    let kind = match kind {
                        NodeKind::Directory { marker, .. } => NodeKind::Directory {
                            children: BTreeMap::new(),
                            marker,
                        },
                        file => file,
                    };
                    let added = self.add(inode, &name, kind);
                    self.set_stored(added, stored);
                    if self.is_directory(added) {
                        self.refresh_directory(added, fresh);
                    }
                }
            }
        }
    }

    /// Files and directories in the tree, the root included.
    #[cfg(test)]
    fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Checks every kept subdirectory count against a count of the children.
    #[cfg(test)]
    fn assert_subdirectory_counts(&self) {
        for (inode, node) in &self.nodes {
            if let NodeKind::Directory { children, .. } = &node.kind {
                let counted = children
                    .values()
                    .filter(|child| self.is_directory(**child))
                    .count() as u32;
                assert_eq!(
                    self.subdirectory_count(*inode),
                    counted,
                    "directory {inode}"
                );
            }
        }
        assert!(self
            .subdirectories
            .keys()
            .all(|inode| self.is_directory(*inode)));
    }
}

/// The component `name` checked for a new entry of directory `parent` in `tree`: the
/// store name it makes (and the marker's, for a directory, must fit too).
pub fn checked_component(
    tree: &Tree,
    parent: u64,
    name: &std::ffi::OsStr,
    directory: bool,
) -> Result<String, ComponentRefusal> {
    let name = name.to_str().ok_or(ComponentRefusal::NotUtf8)?;
    if name.contains(SEPARATOR) {
        return Err(ComponentRefusal::HoldsSeparator);
    }
    if name == DIRECTORY_MARKER {
        return Err(ComponentRefusal::Reserved);
    }
    let mut store_name = tree.store_name(parent, Some(name));
    if directory {
        store_name.push(SEPARATOR);
        store_name.push_str(DIRECTORY_MARKER);
    }
    if store_name.len() > MAX_NAME_BYTES {
        return Err(ComponentRefusal::TooLong);
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> StoreEntry {
        StoreEntry {
            name: name.to_string(),
            size_bytes: 3,
            modified_ns: 7,
            stored: Stored::default(),
        }
    }

    fn tree_of(names: &[&str]) -> Tree {
        let entries: Vec<StoreEntry> = names.iter().map(|name| entry(name)).collect();
        Tree::new(&entries)
    }

    #[test]
    fn colons_are_directories_and_markers_keep_empty_ones() {
        let tree = tree_of(&["a:b:c", "a:d", "e:.flashpipe-dir", "top"]);
        let a = tree.child(ROOT_INODE, "a").expect("a");
        let b = tree.child(a, "b").expect("a/b");
        let c = tree.child(b, "c").expect("a/b/c");
        assert!(tree.is_directory(a) && tree.is_directory(b) && !tree.is_directory(c));
        assert_eq!(tree.store_name(c, None), "a:b:c");
        let e = tree.child(ROOT_INODE, "e").expect("e");
        assert!(tree.has_marker(e) && tree.children(e).is_empty());
        assert_eq!(tree.marker_name(e), "e:.flashpipe-dir");
        assert!(tree.hidden().is_empty());
        let mut under = tree.store_names_under(a);
        under.sort();
        assert_eq!(under, ["a:b:c", "a:d"]);
    }

    #[test]
    fn names_no_path_shows_are_hidden() {
        let tree = tree_of(&[
            "a::b",
            ":x",
            "y:",
            ".",
            "z:..",
            "d",
            "d:e",
            ".flashpipe-dir",
        ]);
        let mut hidden = tree.hidden().to_vec();
        hidden.sort();
        assert_eq!(
            hidden,
            [".", ".flashpipe-dir", ":x", "a::b", "d", "y:", "z:.."]
        );
        let d = tree.child(ROOT_INODE, "d").expect("d");
        assert!(
            tree.is_directory(d),
            "the directory wins over the file of its name"
        );
    }

    #[test]
    fn renames_and_removals_keep_names_consistent() {
        let mut tree = tree_of(&["a:b:c", "x:.flashpipe-dir"]);
        tree.assert_subdirectory_counts();
        assert_eq!(tree.subdirectory_count(ROOT_INODE), 2);
        let a = tree.child(ROOT_INODE, "a").expect("a");
        let x = tree.child(ROOT_INODE, "x").expect("x");
        tree.rename(a, x, "moved");
        tree.assert_subdirectory_counts();
        assert_eq!(tree.subdirectory_count(ROOT_INODE), 1);
        assert_eq!(tree.subdirectory_count(x), 1);
        let b = tree
            .child(tree.child(x, "moved").expect("moved"), "b")
            .expect("b");
        let c = tree.child(b, "c").expect("c");
        assert_eq!(tree.store_name(c, None), "x:moved:b:c");
        assert!(tree.is_within(c, x) && !tree.is_within(x, c));
        tree.remove(x);
        tree.assert_subdirectory_counts();
        assert_eq!(tree.node_count(), 1, "only the root is left");
        assert!(tree.child(ROOT_INODE, "a").is_none());
    }

    #[test]
    fn a_refresh_follows_other_clients_and_keeps_inode_numbers() {
        let mut tree = tree_of(&["a:kept", "a:gone", "a:sub:x", "top"]);
        let a = tree.child(ROOT_INODE, "a").expect("a");
        let kept = tree.child(a, "kept").expect("kept");
        let fresh = Tree::new(&[
            StoreEntry {
                name: "a:kept".into(),
                size_bytes: 99,
                modified_ns: 8,
                stored: Stored::default(),
            },
            entry("a:new"),
            entry("a:newdir:y"),
            entry("a:.flashpipe-dir"),
            entry("top"),
        ]);
        tree.refresh_directory(a, &fresh);
        tree.assert_subdirectory_counts();
        assert_eq!(
            tree.child(a, "kept"),
            Some(kept),
            "an entry still there keeps its inode"
        );
        assert!(matches!(
            tree.node(kept).map(|node| &node.kind),
            Some(NodeKind::File { size_bytes: 99, .. })
        ));
        assert!(tree.child(a, "gone").is_none() && tree.child(a, "sub").is_none());
        let new_directory = tree.child(a, "newdir").expect("a directory made meanwhile");
        assert!(tree.child(new_directory, "y").is_some());
        assert!(tree.child(a, "new").is_some() && tree.has_marker(a));
    }

    #[test]
    fn components_are_checked_before_anything_is_sent() {
        let tree = tree_of(&["a:b"]);
        let a = tree.child(ROOT_INODE, "a").expect("a");
        let check = |name: &str, directory| {
            checked_component(&tree, a, std::ffi::OsStr::new(name), directory)
        };
        assert_eq!(check("x", false), Ok("x".to_string()));
        assert_eq!(check("x:y", false), Err(ComponentRefusal::HoldsSeparator));
        assert_eq!(
            check(DIRECTORY_MARKER, true),
            Err(ComponentRefusal::Reserved)
        );
        assert_eq!(
            check(&"n".repeat(253), false).map(|name| name.len()),
            Ok(253)
        );
        assert_eq!(
            check(&"n".repeat(254), false),
            Err(ComponentRefusal::TooLong)
        );
        assert_eq!(
            check(&"n".repeat(240), true),
            Err(ComponentRefusal::TooLong)
        );
    }

    #[test]
    fn stored_attributes_come_from_files_and_markers_and_refresh() {
        let stored = Stored {
            mode: Some(0o600),
            owner: Some(FileOwner { uid: 7, gid: 8 }),
            modified_wall_ns: Some(1_700_000_000_000_000_000),
        };
        let with = |name: &str| StoreEntry {
            stored,
            ..entry(name)
        };
        let tree = Tree::new(&[with("d:f"), with("d:.flashpipe-dir"), entry("d:g")]);
        let d = tree.child(ROOT_INODE, "d").expect("d");
        let f = tree.child(d, "f").expect("d/f");
        let g = tree.child(d, "g").expect("d/g");
        assert_eq!(tree.node(d).map(|node| node.stored), Some(stored));
        assert_eq!(tree.node(f).map(|node| node.stored), Some(stored));
        assert_eq!(
            tree.node(g).map(|node| node.stored),
            Some(Stored::default())
        );
        let mut old = tree_of(&["d:f", "d:g"]);
        let old_d = old.child(ROOT_INODE, "d").expect("d");
        old.refresh_directory(old_d, &tree);
        let old_f = old.child(old_d, "f").expect("d/f");
        assert_eq!(old.node(old_d).map(|node| node.stored), Some(stored));
        assert_eq!(old.node(old_f).map(|node| node.stored), Some(stored));
    }
}

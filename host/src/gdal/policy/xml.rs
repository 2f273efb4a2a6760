//! XML documents as GDAL reads them: parsed by GDAL's own parser (`CPLParseXMLString`), walked
//! over the very tree GDAL's drivers walk, and looked up with GDAL's own `CPLGetXMLValue` and
//! `CPLGetXMLNode`.
//!
//! Every check that asks what a VRT or an `.aux.xml` makes GDAL read uses this tree, so the
//! host and the driver cannot read one document two ways. A conforming XML parser could not
//! give that: it normalises white space inside attribute values and line ends in text, lists
//! namespace declarations apart from attributes and drops comments, where GDAL's parser keeps
//! each byte, treats `xmlns` as an attribute and keeps a comment as a node that
//! `GDALMultiDomainMetadata` takes as a value (attack round 14, R14-1 and R14-2: a mask band's
//! source named through a literal CR, LF or TAB, and an `<MDI>` keyed by an `xmlns` declaration
//! or valued by a comment, read outside files that the host's parser saw as inside or not at
//! all). Values are bytes, never a lossy decoding (R14-3).
//!
//! A tree is bound to the thread that parsed it (it holds GDAL's pointers) and freed with it.

use crate::gdal::GdalError;
use std::borrow::Cow;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::path::Path;

/// Deepest element nesting handed to GDAL's parser. A VRT or an `.aux.xml` is a handful of
/// levels deep; the walk here is iterative, and the bound keeps the tree small (regression,
/// issue 21, attack round 5, F7: 100000 nested elements in an `.aux.xml`).
pub const MAX_XML_DEPTH: usize = 256;

/// Operator override of [`DEFAULT_XML_MAX_MEMORY_BYTES`].
pub const XML_MEMORY_VARIABLE: &str = "GDAL_MCP_XML_MAX_MEMORY_BYTES";
/// The most memory one XML tree (`CPLXMLNode`) may be expected to take, whether GDAL builds it
/// at an open (a VRT, a PAM `.aux.xml`, a GML schema, one GML feature) or the host does to
/// check a document (512 MiB).
pub const DEFAULT_XML_MAX_MEMORY_BYTES: u64 = 512 << 20;
/// Bytes a `CPLXMLNode` tree holds per element and per byte of text, measured with GDAL 3.6
/// and rounded up: 22 MB of 6 M empty `<a/>` elements in one GML LineString took `vector_info`
/// 590 MB, the same in a GeoTIFF's `.aux.xml` `raster_info` 619 MB, about 100 bytes an element
/// (attack round 21, R21-A1, R21-A5).
pub const XML_ELEMENT_BYTES: u64 = 160;
/// Bytes a tree holds per byte of text.
pub const XML_TEXT_FACTOR: u64 = 2;

/// What a node of GDAL's tree is (`CPLXMLNodeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Element,
    Text,
    Attribute,
    Comment,
    Literal,
}

/// A document parsed by `CPLParseXMLString`: its top-level nodes (a `<?xml ...?>` declaration,
/// comments, the root element) and everything below them.
pub struct Document {
    first: *mut gdal_sys::CPLXMLNode,
    /// The tree's estimated size, taken from the shared memory budget while it lives.
    _reserved: Option<crate::budget::Reservation<'static>>,
}

/// One node of a [`Document`], valid while the document lives.
#[derive(Clone, Copy)]
pub struct Node<'d> {
    ptr: *const gdal_sys::CPLXMLNode,
    _document: PhantomData<&'d Document>,
}

impl Document {
    /// Parse `bytes` as GDAL does: up to the first NUL byte (GDAL hands its parser a C string),
    /// after a bound on nesting. GDAL's parse errors are kept off every other capture: a
    /// document GDAL's parser refuses is refused here too (GDAL would not open it).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Document, GdalError> {
        let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
        let bytes = &bytes[..end];
        // The tree this parse builds is bounded like GDAL's own (R21-A5: a schema of 6 M
        // empty elements took the host's check itself 580 MB).
        let elements = bytes.iter().filter(|b| **b == b'<').count() as u64;
        let tree = elements.saturating_mul(XML_ELEMENT_BYTES);
        let budget = crate::budget::setting(XML_MEMORY_VARIABLE, DEFAULT_XML_MAX_MEMORY_BYTES);
        if tree > budget {
            return Err(GdalError::Arguments(format!(
                "{}: its XML holds {elements} elements, a tree of an estimated {tree} bytes, \
                 more than the {budget} bytes one XML tree may take ({XML_MEMORY_VARIABLE}); \
                 nothing was read. Simplify or split it outside the server, or raise \
                 {XML_MEMORY_VARIABLE}",
                path.display()
            )));
        }
        let reserved = if tree > 1 << 20 {
            Some(crate::budget::reserve(
                &format!("{}: checking its XML", path.display()),
                tree,
            )?)
        } else {
            None
        };
        let depth = xml_depth(bytes, MAX_XML_DEPTH);
        if depth > MAX_XML_DEPTH {
            return Err(GdalError::Arguments(format!(
                "{}: its XML nests elements more than {MAX_XML_DEPTH} levels deep (at least \
                 {depth}); it is not opened, because what it references could not be checked \
                 safely. Flatten the document",
                path.display()
            )));
        }
        // No NUL is left in `bytes`.
        let text = CString::new(bytes).map_err(|_| {
            GdalError::Arguments(format!("{}: cannot be read as XML", path.display()))
        })?;
        let capture = crate::gdal::ErrorCapture::start();
        // SAFETY: `text` is a NUL-terminated string that outlives the call; the returned tree
        // is owned by the Document, which frees it once.
        let first = unsafe { gdal_sys::CPLParseXMLString(text.as_ptr()) };
        let document = Document {
            first,
            _reserved: reserved,
        };
        if first.is_null() {
            return Err(GdalError::Arguments(format!(
                "{}: GDAL's XML parser cannot read it ({}); fix the XML",
                path.display(),
                capture.failure_text("not XML")
            )));
        }
        if document.top().any(|n| {
            n.kind() == Kind::Literal && n.text().to_ascii_uppercase().starts_with("<!DOCTYPE")
        }) {
            return Err(GdalError::Arguments(format!(
                "{}: an XML document that declares a DTD is not opened (GDAL never writes one, \
                 and its entities could hide what it names); remove the <!DOCTYPE>",
                path.display()
            )));
        }
        Ok(document)
    }

    /// The top-level nodes, in order.
    pub fn top(&self) -> impl Iterator<Item = Node<'_>> {
        siblings(self.first)
    }

    /// The first top-level element named `name` (without case), as GDAL's drivers find their
    /// root (`CPLGetXMLNode(tree, "=VRTDataset")`).
    pub fn root_element(&self, name: &str) -> Option<Node<'_>> {
        self.top()
            .find(|n| n.kind() == Kind::Element && n.name().eq_ignore_ascii_case(name))
    }

    /// Every element, top-level ones included, in document order.
    pub fn elements(&self) -> Vec<Node<'_>> {
        self.descendants()
            .into_iter()
            .filter(|n| n.is_element())
            .collect()
    }

    /// Every node, top-level ones included, in document order (attributes before the
    /// children they belong with). Iterative: depth never grows the stack.
    pub fn descendants(&self) -> Vec<Node<'_>> {
        let mut found = Vec::new();
        let mut stack: Vec<Node> = self.top().collect();
        stack.reverse();
        while let Some(node) = stack.pop() {
            found.push(node);
            let children: Vec<Node> = node.children().collect();
            stack.extend(children.into_iter().rev());
        }
        found
    }
}

impl Drop for Document {
    fn drop(&mut self) {
        if !self.first.is_null() {
            // SAFETY: the tree came from CPLParseXMLString and is freed once, here;
            // CPLDestroyXMLNode frees the node, its children and its siblings.
            unsafe { gdal_sys::CPLDestroyXMLNode(self.first) };
        }
    }
}

fn siblings<'d>(first: *const gdal_sys::CPLXMLNode) -> impl Iterator<Item = Node<'d>> {
    let mut next = first;
    std::iter::from_fn(move || {
        if next.is_null() {
            return None;
        }
        let node = Node {
            ptr: next,
            _document: PhantomData,
        };
        // SAFETY: `next` is a live node of the document's tree.
        next = unsafe { (*next).psNext };
        Some(node)
    })
}

impl<'d> Node<'d> {
    fn raw(&self) -> &'d gdal_sys::CPLXMLNode {
        // SAFETY: the node belongs to a Document that outlives 'd.
        unsafe { &*self.ptr }
    }

    pub fn kind(&self) -> Kind {
        use gdal_sys::CPLXMLNodeType as Type;
        match self.raw().eType {
            Type::CXT_Element => Kind::Element,
            Type::CXT_Attribute => Kind::Attribute,
            Type::CXT_Comment => Kind::Comment,
            Type::CXT_Literal => Kind::Literal,
            _ => Kind::Text,
        }
    }

    /// The node's value as GDAL holds it: an element's or attribute's name, a text's or
    /// comment's content.
    pub fn bytes(&self) -> &'d [u8] {
        let value = self.raw().pszValue;
        if value.is_null() {
            return &[];
        }
        // SAFETY: GDAL's node values are NUL-terminated strings owned by the tree.
        unsafe { CStr::from_ptr(value) }.to_bytes()
    }

    /// [`Self::bytes`] as text (names and numbers are ASCII; a lossy decoding serves only
    /// matching and messages, never a path).
    pub fn text(&self) -> Cow<'d, str> {
        String::from_utf8_lossy(self.bytes())
    }

    /// An element's or attribute's name.
    pub fn name(&self) -> Cow<'d, str> {
        self.text()
    }

    pub fn is_element(&self) -> bool {
        self.kind() == Kind::Element
    }

    /// The node's children: an element's attributes first, then its content, in order.
    pub fn children(&self) -> impl Iterator<Item = Node<'d>> {
        siblings(self.raw().psChild)
    }

    /// The next node after this one under the same parent.
    pub fn next(&self) -> Option<Node<'d>> {
        siblings(self.raw().psNext).next()
    }

    /// The child elements.
    pub fn elements(&self) -> impl Iterator<Item = Node<'d>> {
        self.children().filter(|c| c.is_element())
    }

    /// The attributes, each as (name, value); an attribute's value is its text child.
    pub fn attributes(&self) -> impl Iterator<Item = (Cow<'d, str>, &'d [u8])> {
        self.children()
            .filter(|c| c.kind() == Kind::Attribute)
            .map(|a| (a.name(), a.children().next().map_or(&[][..], |v| v.bytes())))
    }

    /// `CPLGetXMLValue(node, name, NULL)`, by GDAL itself: an attribute's value, or an
    /// element's when its only content is one text; `None` otherwise. `name` is one name, not
    /// a path.
    pub fn value(&self, name: &str) -> Option<&'d [u8]> {
        let name = CString::new(name).ok()?;
        // SAFETY: the node is live, `name` is NUL-terminated, and the returned pointer (when
        // not NULL) points into the tree.
        let value = unsafe { gdal_sys::CPLGetXMLValue(self.ptr, name.as_ptr(), std::ptr::null()) };
        if value.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string owned by the tree.
        Some(unsafe { CStr::from_ptr(value) }.to_bytes())
    }

    /// [`Self::value`] as text (for names and numbers).
    pub fn value_text(&self, name: &str) -> Option<Cow<'d, str>> {
        self.value(name).map(String::from_utf8_lossy)
    }

    /// `CPLGetXMLNode(node, name)`, by GDAL itself: the first child that is not text named
    /// `name` without case (an element, an attribute, even a comment).
    pub fn child(&self, name: &str) -> Option<Node<'d>> {
        let name = CString::new(name).ok()?;
        // SAFETY: as for `value`; CPLGetXMLNode only reads the tree.
        let found = unsafe { gdal_sys::CPLGetXMLNode(self.ptr as *mut _, name.as_ptr()) };
        (!found.is_null()).then_some(Node {
            ptr: found,
            _document: PhantomData,
        })
    }

    /// Every node below this one, in document order. Iterative.
    pub fn descendants(&self) -> Vec<Node<'d>> {
        let mut found = Vec::new();
        let mut stack: Vec<Node<'d>> = self.children().collect();
        stack.reverse();
        while let Some(node) = stack.pop() {
            found.push(node);
            let children: Vec<Node<'d>> = node.children().collect();
            stack.extend(children.into_iter().rev());
        }
        found
    }

    /// The texts GDAL could take from an element: each text child alone, and all of them
    /// joined (GDAL takes a lone text child; a comment splitting it must not hide a path).
    pub fn texts(&self) -> Vec<&'d [u8]> {
        self.children()
            .filter(|c| c.kind() == Kind::Text)
            .map(|c| c.bytes())
            .collect()
    }

    /// This element serialised alone by GDAL (`CPLSerializeXMLTree`), as a driver hands a
    /// subtree to another parser (a warped VRT's `<Transformer>`).
    pub fn serialized(&self) -> Option<String> {
        // CPLSerializeXMLTree writes a node's siblings too: serialise a copy made without them.
        // SAFETY: CPLCloneXMLTree copies the node, its children and its siblings into a new tree
        // that is ours; its siblings are cut off and freed before serialising it.
        unsafe {
            let copy = gdal_sys::CPLCloneXMLTree(self.ptr);
            if copy.is_null() {
                return None;
            }
            let rest = (*copy).psNext;
            (*copy).psNext = std::ptr::null_mut();
            if !rest.is_null() {
                gdal_sys::CPLDestroyXMLNode(rest);
            }
            let text = gdal_sys::CPLSerializeXMLTree(copy);
            gdal_sys::CPLDestroyXMLNode(copy);
            if text.is_null() {
                return None;
            }
            let owned = CStr::from_ptr(text).to_string_lossy().into_owned();
            gdal_sys::VSIFree(text.cast());
            Some(owned)
        }
    }
}

/// Largest imagery metadata document read beside an input to count its nesting; a larger one
/// is refused (GDAL's readers parse them whole; a real one is a few hundred KiB).
pub const MAX_METADATA_DOCUMENT_BYTES: u64 = 16 << 20;

/// Most elements in an imagery metadata document beside an input. GDAL's SPOT reader adds
/// them to a list one at a time, walking the list each time (quadratic: 120,000 elements took
/// 4.7 s, 600,000 kept a worker busy for minutes past the open deadline: attack round 14,
/// R14-11); a real `METADATA.DIM` holds a few thousand.
pub const MAX_METADATA_ELEMENTS: usize = 50_000;

/// Whether GDAL's imagery metadata readers parse the XML file `name` (lower case) in the
/// folder of an input whose file name is `input_name` (lower case): SPOT's `METADATA.DIM` (and
/// any `.dim`), Pleiades' `DIM_*.XML` and `RPC_*.XML`, DigitalGlobe's and Resurs-DK1's
/// `<stem>.XML`, RapidEye's `<stem>_metadata.xml`.
fn read_by_metadata_readers(name: &str, input_name: &str) -> bool {
    let stem = input_name
        .rsplit_once('.')
        .map_or(input_name, |(stem, _)| stem);
    name.ends_with(".dim")
        || (name.ends_with(".xml")
            && (name.starts_with("dim_")
                || name.starts_with("rpc_")
                || name == format!("{stem}.xml")
                || name == format!("{stem}_metadata.xml")))
}

/// Most `key = value` entries a keyword document beside an input may hold
/// ([`keyword_document`]): GDAL's keyword parser inserts each with a linear search, so a 1.8 MB
/// DigitalGlobe `.IMD` of 150,000 keys held an open past its 30 s deadline, and an ENVI `.hdr`
/// of 80,000 did the same (attack round 17, R17-A7). Real ones hold a few hundred.
const MAX_METADATA_KEYWORDS: usize = 10_000;

/// Whether GDAL parses a file of this (lower-case) name beside the input `input_name` as
/// keywords: the imagery readers' DigitalGlobe `.imd` and `.rpb`, Landsat `_mtl.txt`, OrbView
/// `.pvl`, RPC `_rpc.txt`, GeoEye `_metadata.txt`, Kompsat's `<stem>.txt` (R18-A5), and ENVI's
/// `.hdr`.
fn keyword_document(name: &str, input_name: &str) -> bool {
    let stem = input_name
        .rsplit_once('.')
        .map_or(input_name, |(stem, _)| stem);
    [
        ".imd",
        ".rpb",
        "_mtl.txt",
        ".pvl",
        "_rpc.txt",
        "_metadata.txt",
        ".hdr",
    ]
    .iter()
    .any(|suffix| name.ends_with(suffix))
        || name == format!("{stem}.txt")
}

/// Refuse `file` when an imagery metadata document beside it ([`read_by_metadata_readers`])
/// nests deeper than [`MAX_XML_DEPTH`], holds more than [`MAX_METADATA_ELEMENTS`] elements or
/// is over [`MAX_METADATA_DOCUMENT_BYTES`]: GDAL's readers parse them while GDAL lists the
/// dataset's files, recursively (a 70 KB `METADATA.DIM` of 9,990 nested elements beside a clean
/// GeoTIFF overflowed a worker's stack and aborted the server: attack round 14, R14-9) and in
/// quadratic time (R14-11).
pub fn check_metadata_documents(input: &Path, file: &Path) -> Result<(), GdalError> {
    use std::io::Read;
    let (Some(folder), Some(input_name)) = (file.parent(), file.file_name()) else {
        return Ok(());
    };
    let input_name = input_name.to_string_lossy().to_ascii_lowercase();
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Ok(());
    };
    for entry in entries
        .filter_map(Result::ok)
        .take(crate::workspace::MAX_FOLDER_ENTRIES)
    {
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        let keywords = keyword_document(&name, &input_name);
        // A link is judged by what it points to: GDAL's readers open it through the link
        // (attack round 18, R18-A3: `x.IMD -> ../blobs/notes.txt` was never measured).
        if !(keywords || read_by_metadata_readers(&name, &input_name))
            || !std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file())
        {
            continue;
        }
        let path = entry.path();
        let refuse = |why: String| {
            GdalError::Arguments(format!(
                "{}: the metadata document {} beside it {why}; GDAL's imagery metadata readers \
                 parse it while they open the input. Move the input to a folder of its own or \
                 remove the document",
                input.display(),
                path.display()
            ))
        };
        let mut bytes = Vec::new();
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if super::open_regular(&path)
            .and_then(|f| {
                f.take(MAX_METADATA_DOCUMENT_BYTES + 1)
                    .read_to_end(&mut bytes)
            })
            .is_err()
        {
            continue;
        }
        // What was counted here is what GDAL may read: its identity is held to the open.
        super::record_checked(vec![(path.clone(), meta)]);
        if bytes.len() as u64 > MAX_METADATA_DOCUMENT_BYTES {
            return Err(refuse(format!(
                "is over {} MiB, more than a metadata document holds",
                MAX_METADATA_DOCUMENT_BYTES >> 20
            )));
        }
        if keywords {
            let keys = bytes.iter().filter(|b| **b == b'=').count();
            if keys > MAX_METADATA_KEYWORDS {
                return Err(refuse(format!(
                    "holds {keys} keywords, more than {MAX_METADATA_KEYWORDS} (GDAL's keyword \
                     parser takes time quadratic in them)"
                )));
            }
            continue;
        }
        let depth = xml_depth(&bytes, MAX_XML_DEPTH);
        if depth > MAX_XML_DEPTH {
            return Err(refuse(format!(
                "nests elements more than {MAX_XML_DEPTH} levels deep (at least {depth})"
            )));
        }
        let elements = bytes
            .windows(2)
            .filter(|w| w[0] == b'<' && w[1].is_ascii_alphabetic())
            .count();
        if elements > MAX_METADATA_ELEMENTS {
            return Err(refuse(format!(
                "holds {elements} elements, more than {MAX_METADATA_ELEMENTS} (GDAL's readers \
                 take time quadratic in them)"
            )));
        }
    }
    Ok(())
}

/// How deep elements nest in `bytes`, counted without recursion and stopping as soon as the
/// count passes `limit`: every start tag that is not self-closing opens a level, every end
/// tag closes one; comments, CDATA, processing instructions and declarations are skipped,
/// and quoted attribute values may hold `>`. It never counts fewer levels than a parser
/// would build, which is what makes it a guard.
pub fn xml_depth(bytes: &[u8], limit: usize) -> usize {
    let skip_to = |from: usize, end: &[u8]| -> usize {
        bytes[from.min(bytes.len())..]
            .windows(end.len())
            .position(|w| w == end)
            .map_or(bytes.len(), |at| from + at + end.len())
    };
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &bytes[i..];
        if rest.starts_with(b"<!--") {
            i = skip_to(i + 4, b"-->");
        } else if rest.starts_with(b"<![CDATA[") {
            i = skip_to(i + 9, b"]]>");
        } else if rest.starts_with(b"<?") {
            i = skip_to(i + 2, b"?>");
        } else if rest.starts_with(b"<!") {
            i = skip_to(i + 2, b">");
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            i = skip_to(i + 2, b">");
        } else {
            // A start tag: to its `>`, outside quoted attribute values.
            let mut j = i + 1;
            let mut quote = None;
            while j < bytes.len() {
                match (quote, bytes[j]) {
                    (None, b'"' | b'\'') => quote = Some(bytes[j]),
                    (Some(q), c) if c == q => quote = None,
                    (None, b'>') => break,
                    _ => {}
                }
                j += 1;
            }
            if !(j < bytes.len() && bytes[j - 1] == b'/') {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > limit {
                    return deepest;
                }
            }
            i = j + 1;
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Document {
        Document::parse(Path::new("t.xml"), text.as_bytes()).expect("parse")
    }

    /// Regression (issue 21, attack round 5, F7): nesting is counted without recursion and
    /// never below what a parser builds (quoted `>`, comments, CDATA, self-closing tags).
    #[test]
    fn xml_depth_counts_levels_without_recursion() {
        assert_eq!(xml_depth(b"<a><b/><c x='>'><d>t</d></c></a>", 99), 3);
        assert_eq!(
            xml_depth(
                b"<?xml version='1.0'?><!-- <x><y> --><a><![CDATA[<z>]]></a>",
                99
            ),
            1
        );
        let deep = format!("{}{}", "<a>".repeat(100_000), "</a>".repeat(100_000));
        assert_eq!(xml_depth(deep.as_bytes(), MAX_XML_DEPTH), MAX_XML_DEPTH + 1);
        assert!(Document::parse(Path::new("d.xml"), deep.as_bytes()).is_err());
    }

    /// Regression (attack round 14, R14-1): GDAL's parser keeps a literal CR, LF or TAB inside
    /// an attribute value and a CR inside text, and skips only ASCII white space before a
    /// text; a conforming parser had turned `d\r/secret.tif` into `d\n/secret.tif` and an
    /// attribute's LF into a space, naming an inside folder where GDAL opened a link outside.
    #[test]
    fn r14_1_white_space_is_kept_as_gdal_keeps_it() {
        let document = parsed(
            "<VRTDataset><S SourceFilename=\"/w/e\n/s.tif\"><SourceFilename>d\r/s.tif\
             </SourceFilename></S><T>\u{a0}f/s.tif</T></VRTDataset>",
        );
        let root = document.root_element("vrtdataset").expect("root");
        let source = root.child("S").expect("S");
        assert_eq!(source.value("SourceFilename"), Some(&b"/w/e\n/s.tif"[..]));
        let element = source.elements().next().expect("element");
        assert_eq!(element.texts(), vec![&b"d\r/s.tif"[..]]);
        assert_eq!(root.value("T"), Some("\u{a0}f/s.tif".as_bytes()));
    }

    /// Regression (attack round 14, R14-2): an `xmlns` declaration is an attribute to GDAL,
    /// and a comment is a node whose value `GDALMultiDomainMetadata` takes.
    #[test]
    fn r14_2_namespace_declarations_and_comments_are_nodes() {
        let document = parsed(
            "<M><MDI xmlns=\"X_DATASET\">/o/lon.tif</MDI><MDI key=\"K\"><!--/o/c--></MDI></M>",
        );
        let root = document.root_element("M").expect("root");
        let items: Vec<Node> = root.elements().collect();
        let first = items[0].children().next().expect("attribute");
        assert_eq!(first.kind(), Kind::Attribute);
        assert_eq!(first.name(), "xmlns");
        let comment = items[1].children().nth(1).expect("comment");
        assert_eq!(comment.kind(), Kind::Comment);
        assert_eq!(comment.bytes(), b"/o/c");
    }

    #[test]
    fn values_are_looked_up_by_gdal_and_decoded_as_gdal_decodes_them() {
        let document = parsed(
            "<?xml version=\"1.0\"?><VRTDataset rasterXSize=\"4\"><A>&#47;etc&#x2F;x</A>\
             <B>one<!-- c -->two</B><K><Size>7</Size></K></VRTDataset>",
        );
        assert_eq!(document.top().count(), 2);
        let root = document.root_element("VRTDATASET").expect("root");
        assert_eq!(root.value("rasterxsize"), Some(&b"4"[..]));
        assert_eq!(root.value("A"), Some(&b"/etc/x"[..]));
        // Two texts: GDAL's lookup gives nothing; both texts are there for the walk.
        assert_eq!(root.value("B"), None);
        assert_eq!(
            root.child("B").expect("B").texts(),
            vec![&b"one"[..], b"two"]
        );
        assert_eq!(
            root.child("K").and_then(|k| k.value("Size")),
            Some(&b"7"[..])
        );
        let serialized = root
            .child("K")
            .and_then(|k| k.serialized())
            .expect("serialised");
        assert_eq!(serialized.trim(), "<K>\n  <Size>7</Size>\n</K>");
    }

    /// Regression (attack round 14, R14-9): a `METADATA.DIM` of 9,990 nested elements beside a
    /// clean GeoTIFF aborted the server while GDAL's SPOT reader walked it; the twin of
    /// ordinary depth (and a deep `.aux.xml`, which the references' own parse refuses) pass
    /// this check.
    #[test]
    fn r14_9_a_deep_metadata_document_beside_an_input_refuses_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tif = dir.path().join("x.tif");
        std::fs::write(&tif, b"II*\0").expect("write");
        std::fs::write(
            dir.path().join("METADATA.DIM"),
            "<Dimap_Document><Dataset_Id><DATASET_NAME>x</DATASET_NAME></Dataset_Id></Dimap_Document>",
        )
        .expect("write");
        assert!(check_metadata_documents(&tif, &tif).is_ok());
        let deep = format!("{}{}", "<a>".repeat(9_990), "</a>".repeat(9_990));
        std::fs::write(dir.path().join("METADATA.DIM"), &deep).expect("write");
        let why = check_metadata_documents(&tif, &tif)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("METADATA.DIM") && why.contains("levels deep"),
            "{why}"
        );
        // R14-11: 60,000 sibling elements (quadratic in GDAL's SPOT reader) are refused.
        let wide = format!(
            "<Dimap_Document>{}</Dimap_Document>",
            "<a>x</a>".repeat(60_000)
        );
        std::fs::write(dir.path().join("METADATA.DIM"), &wide).expect("write");
        let why = check_metadata_documents(&tif, &tif)
            .unwrap_err()
            .to_string();
        assert!(why.contains("elements"), "{why}");
        // An XML file the readers do not parse (another stem) is not read; `<stem>.XML` is.
        std::fs::remove_file(dir.path().join("METADATA.DIM")).expect("remove");
        std::fs::write(dir.path().join("other.xml"), &deep).expect("write");
        assert!(check_metadata_documents(&tif, &tif).is_ok());
        std::fs::rename(dir.path().join("other.xml"), dir.path().join("X.XML")).expect("rename");
        assert!(check_metadata_documents(&tif, &tif).is_err());
    }

    #[test]
    fn a_document_gdal_cannot_parse_or_with_a_dtd_is_refused() {
        assert!(Document::parse(Path::new("x"), b"<a><b></a>").is_err());
        let dtd = br#"<!DOCTYPE x [<!ENTITY p "/etc/passwd">]><VRTDataset/>"#;
        assert!(Document::parse(Path::new("x"), dtd).is_err());
    }
}

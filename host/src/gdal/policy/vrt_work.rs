//! The work a VRT makes GDAL do for the cells it gives: source cells read and kernel
//! multiply-adds behind every VRT cell, estimated from the document before the open.
//!
//! The cell budget (`GDAL_MCP_MAX_CELLS`) counts the cells a tool reads from its input, but a
//! VRT cell can cost far more than one cell of work: an 82 KB VRT reading a 2000² GeoTIFF
//! through a 201 x 201 `KernelFilteredSource` does 40,401 multiply-adds per cell (one
//! `raster_stats` ran ~3 min of CPU that cancellation could not stop), and a 447-byte VRT of
//! 10 x 10 cells averaging a sparse 200000² GeoTIFF reads 20000² source cells per cell
//! (`raster_info` hung; the GeoTIFF alone is refused by the cell budget) (issue 21, attack
//! round 10, R10-13). [`estimate`] counts, for a whole read of every band:
//! * per source, the cells GDAL reads from it: its destination window's cells, or its source
//!   window's cells when a non-nearest resampling (or an `AveragedSource`) reduces a larger
//!   window (every source cell is read), times the work per cell of that source when it is
//!   itself a VRT already estimated;
//! * per `KernelFilteredSource`, its destination cells times the kernel's size squared.
//!
//! The caller refuses a VRT whose work exceeds the cell budget *and* is more than
//! [`MAX_WORK_PER_CELL`] times its own cells: a plain mosaic (one source cell per cell) or a
//! small kernel stays with the tools' own cell budgets, whatever the mosaic's size.

/// Work per VRT cell a document may carry beyond the cell budget: an 8 x 8 average (an
/// overview level of 3), a 7 x 7 kernel.
pub const MAX_WORK_PER_CELL: f64 = 64.0;

/// What one VRT document costs to read whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    /// The VRT's own cells (width x height x bands).
    pub cells: f64,
    /// Source cells read and kernel multiply-adds for a whole read.
    pub work: f64,
}

impl Work {
    /// Work per VRT cell (at least 1).
    pub fn per_cell(&self) -> f64 {
        if self.cells > 0.0 {
            (self.work / self.cells).max(1.0)
        } else {
            1.0
        }
    }
}

/// A non-negative integer attribute, without case in its name.
fn number(node: &roxmltree::Node, name: &str) -> Option<f64> {
    node.attributes()
        .find(|a| a.name().eq_ignore_ascii_case(name))
        .and_then(|a| a.value().trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// The first child element named `name`, without case.
fn child<'a, 'input>(
    node: &roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name().eq_ignore_ascii_case(name))
}

/// A rectangle element's `xSize x ySize`.
fn rect_cells(node: &roxmltree::Node, name: &str) -> Option<(f64, f64)> {
    let rect = child(node, name)?;
    Some((number(&rect, "xSize")?, number(&rect, "ySize")?))
}

/// Estimate the work of a VRT `document` (parsed once by the confinement walk) whose
/// references already passed the checks; `source_per_cell` gives the work per cell of a
/// source file that is itself an estimated VRT (1 for any other). A warped VRT, or a document
/// without sizes, is not estimated (`None`).
pub fn estimate(
    document: &roxmltree::Document,
    source_per_cell: &dyn Fn(&str) -> f64,
) -> Option<Work> {
    let root = document.root_element();
    if !root.tag_name().name().eq_ignore_ascii_case("VRTDataset") {
        return None;
    }
    let (Some(width), Some(height)) = (number(&root, "rasterXSize"), number(&root, "rasterYSize"))
    else {
        return None;
    };
    let mut cells = 0.0;
    let mut work = 0.0;
    for band in root
        .children()
        .filter(|c| c.is_element() && c.tag_name().name().eq_ignore_ascii_case("VRTRasterBand"))
    {
        cells += width * height;
        for source in band.children().filter(|c| c.is_element()) {
            let tag = source.tag_name().name().to_ascii_lowercase();
            if !tag.ends_with("source") {
                continue;
            }
            let destination = rect_cells(&source, "DstRect")
                .map(|(x, y)| x.min(width) * y.min(height))
                .unwrap_or(width * height);
            let source_cells = rect_cells(&source, "SrcRect")
                .or_else(|| {
                    child(&source, "SourceProperties").and_then(|p| {
                        Some((number(&p, "RasterXSize")?, number(&p, "RasterYSize")?))
                    })
                })
                .map(|(x, y)| x * y);
            let resampling = source
                .attributes()
                .find(|a| a.name().eq_ignore_ascii_case("resampling"))
                .map(|a| a.value().trim().to_ascii_lowercase());
            let averaging = tag == "averagedsource"
                || resampling.is_some_and(|r| !r.is_empty() && !r.starts_with("near"));
            let mut read = destination;
            if let (true, Some(s)) = (averaging, source_cells) {
                read = read.max(s);
            }
            let name = child(&source, "SourceFilename")
                .and_then(|n| n.text())
                .unwrap_or_default()
                .trim()
                .to_string();
            work += read * source_per_cell(&name);
            if tag == "kernelfilteredsource" {
                let size = child(&source, "Kernel")
                    .and_then(|k| child(&k, "Size"))
                    .and_then(|s| s.text())
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .unwrap_or(1.0);
                work += destination * size * size;
            }
        }
    }
    Some(Work { cells, work })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work_of(text: &str) -> Work {
        let document = roxmltree::Document::parse(text).unwrap();
        estimate(&document, &|_| 1.0).unwrap()
    }

    /// R10-13: a 201 x 201 kernel over 2000² is 40,401 multiply-adds per cell (plus the read);
    /// a 3 x 3 kernel is 10 per cell.
    #[test]
    fn r10_13_kernel_work_is_counted() {
        let vrt = |k: usize| {
            format!(
                "<VRTDataset rasterXSize=\"2000\" rasterYSize=\"2000\"><VRTRasterBand band=\"1\">\
                 <KernelFilteredSource><SourceFilename>s.tif</SourceFilename>\
                 <Kernel><Size>{k}</Size><Coefs>1</Coefs></Kernel></KernelFilteredSource>\
                 </VRTRasterBand></VRTDataset>"
            )
        };
        assert_eq!(work_of(&vrt(201)).per_cell(), 40402.0);
        assert_eq!(work_of(&vrt(3)).per_cell(), 10.0);
    }

    /// R10-13: averaging a 200000² window into 10 x 10 cells reads every source cell; the same
    /// window read nearest reads one per cell, and a plain mosaic one per cell.
    #[test]
    fn r10_13_averaged_window_is_counted() {
        let vrt = |resampling: &str| {
            format!(
                "<VRTDataset rasterXSize=\"10\" rasterYSize=\"10\"><VRTRasterBand band=\"1\">\
                 <ComplexSource{resampling}><SourceFilename>b.tif</SourceFilename>\
                 <SrcRect xOff=\"0\" yOff=\"0\" xSize=\"200000\" ySize=\"200000\"/>\
                 <DstRect xOff=\"0\" yOff=\"0\" xSize=\"10\" ySize=\"10\"/></ComplexSource>\
                 </VRTRasterBand></VRTDataset>"
            )
        };
        assert_eq!(work_of(&vrt(" resampling=\"average\"")).work, 4.0e10);
        assert_eq!(work_of(&vrt("")).per_cell(), 1.0);
        let mosaic = work_of(
            "<VRTDataset rasterXSize=\"20\" rasterYSize=\"10\"><VRTRasterBand band=\"1\">\
             <SimpleSource><SourceFilename>a.tif</SourceFilename>\
             <SrcRect xOff=\"0\" yOff=\"0\" xSize=\"10\" ySize=\"10\"/>\
             <DstRect xOff=\"0\" yOff=\"0\" xSize=\"10\" ySize=\"10\"/></SimpleSource>\
             <SimpleSource><SourceFilename>b.tif</SourceFilename>\
             <SrcRect xOff=\"0\" yOff=\"0\" xSize=\"10\" ySize=\"10\"/>\
             <DstRect xOff=\"10\" yOff=\"0\" xSize=\"10\" ySize=\"10\"/></SimpleSource>\
             </VRTRasterBand></VRTDataset>",
        );
        assert_eq!(mosaic.per_cell(), 1.0);
    }
}
